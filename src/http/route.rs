//! Routes: the path shapes under `/v1/`, what each answers, and how a path names one.

use std::convert::Infallible;
use std::str::FromStr;
use warp::http::Method;
use warp::Filter;

use super::Template;
use crate::resources::{self, ResourceType};

/// The chosen route: a path shape with its resolved type and raw segments.
#[derive(Debug)]
pub enum Route {
    /// `/v1` itself: the entry point.
    Home,
    Collection(&'static ResourceType),
    Item(&'static ResourceType, String),
    Related(&'static ResourceType, String, String),
    Relationship(&'static ResourceType, String, String),
    /// `/operations`: atomic operations.
    Operations,
    /// `/revisions`: the change feed.
    Feed,
    /// `/revisions/{id}`: one revision.
    Revision(String),
    /// `/{type}/{id}/revisions`: a resource's revisions.
    History(&'static ResourceType, String),
    /// `/revisions/{id}/restore`: bring a resource back to a revision.
    Restore(String),
    /// `/revisions/stream`: the change feed, live.
    Stream,
}

/// The methods a route answers, as `Allow` lists them.
#[derive(Debug, Clone, Copy)]
pub struct Allow {
    /// In a 405: the methods that act on the resource, as the contract lists them.
    pub methods: &'static str,
    /// In the answer to `OPTIONS` (and a preflight's `Access-Control-Allow-Methods`): every
    /// method, `HEAD` and `OPTIONS` included.
    pub all: &'static str,
}

impl Allow {
    /// Whether `method` is answered.
    pub fn allows(&self, method: &Method) -> bool {
        let method = method.as_str().as_bytes();
        self.all.as_bytes().split(|b| *b == b',').any(|m| m.trim_ascii_start() == method)
    }
}

pub const COLLECTION: Allow = Allow { methods: "GET, POST", all: "GET, POST, HEAD, OPTIONS" };
pub const ITEM: Allow = Allow { methods: "GET, PATCH, DELETE", all: "GET, PATCH, DELETE, HEAD, OPTIONS" };
pub const RELATED: Allow = Allow { methods: "GET", all: "GET, HEAD, OPTIONS" };
pub const TO_ONE: Allow = Allow { methods: "GET, PATCH", all: "GET, PATCH, HEAD, OPTIONS" };
pub const TO_MANY: Allow =
    Allow { methods: "GET, PATCH, POST, DELETE", all: "GET, PATCH, POST, DELETE, HEAD, OPTIONS" };
pub const OPERATIONS: Allow = Allow { methods: "POST", all: "POST, OPTIONS" };
/// Health and the OpenAPI document.
pub const READ_ONLY: Allow = Allow { methods: "GET, HEAD", all: "GET, HEAD, OPTIONS" };

impl Route {
    /// The methods the route answers; `None` when it names a relationship its type does not
    /// have (a 404 whatever the method).
    pub fn allow(&self) -> Option<Allow> {
        match self {
            Route::Collection(_) => Some(COLLECTION),
            Route::Operations | Route::Restore(_) => Some(OPERATIONS),
            Route::Home | Route::Feed | Route::Revision(_) | Route::History(..) | Route::Stream => Some(READ_ONLY),
            Route::Item(..) => Some(ITEM),
            Route::Related(rt, _, rel) => rt.relationship(rel).map(|_| RELATED),
            Route::Relationship(rt, _, rel) => {
                rt.relationship(rel).map(|r| if r.is_to_one() { TO_ONE } else { TO_MANY })
            }
        }
    }

    /// The route's template for the access log; `None` for a relationship its type lacks.
    pub fn template(&self) -> Option<Template> {
        Some(match self {
            Route::Collection(rt) => Template::Collection(rt.name),
            Route::Home => Template::Fixed("/v1"),
            Route::Operations => Template::Fixed("/v1/operations"),
            Route::Feed => Template::Fixed("/v1/revisions"),
            Route::Revision(_) => Template::Item("revisions"),
            Route::History(rt, _) => Template::Related(rt.name, "revisions"),
            Route::Restore(_) => Template::Fixed("/v1/revisions/{id}/restore"),
            Route::Stream => Template::Fixed("/v1/revisions/stream"),
            Route::Item(rt, _) => Template::Item(rt.name),
            Route::Related(rt, _, rel) => Template::Related(rt.name, rt.relationship(rel)?.name),
            Route::Relationship(rt, _, rel) => Template::Relationship(rt.name, rt.relationship(rel)?.name),
        })
    }
}

/// A resource type named by a path segment; any other segment is no route.
struct TypeSegment(&'static ResourceType);

impl FromStr for TypeSegment {
    type Err = ();
    fn from_str(s: &str) -> Result<Self, ()> {
        resources::by_name(s).map(TypeSegment).ok_or(())
    }
}

/// The route the path under `/v1/` names, if any (`None`: a 404 after authorization). One
/// filter reads the whole rest of the path, where a filter per route shape would parse its
/// segments again for each shape tried.
pub(super) fn route() -> impl Filter<Extract = (Option<Route>,), Error = Infallible> + Clone {
    warp::path::tail().map(|rest: warp::path::Tail| Route::of(rest.as_str()))
}

impl Route {
    /// The route of `rest`, the path after `/v1/`, in segments as sent (not percent-decoded),
    /// none of them empty; one trailing `/` is allowed:
    /// - nothing (`/v1` or `/v1/`): the entry point;
    /// - `operations`: POST runs atomic operations;
    /// - `{type}`: GET lists, POST creates;
    /// - `{type}/{id}`: GET reads, PATCH updates, DELETE deletes;
    /// - `{type}/{id}/{relationship}`: GET reads the related resource(s);
    /// - `{type}/{id}/relationships/{relationship}`: GET and PATCH the linkage; POST adds to
    ///   and DELETE removes from a to-many linkage.
    fn of(rest: &str) -> Option<Route> {
        if rest.is_empty() {
            return Some(Route::Home);
        }
        let rest = rest.strip_suffix('/').unwrap_or(rest);
        let mut segments = [""; 4];
        let mut n = 0;
        for segment in rest.split('/') {
            if segment.is_empty() || n == segments.len() {
                return None;
            }
            segments[n] = segment;
            n += 1;
        }
        if segments[..n] == ["operations"] {
            return Some(Route::Operations);
        }
        if segments[0] == "revisions" {
            return match n {
                1 => Some(Route::Feed),
                2 if segments[1] == "stream" => Some(Route::Stream),
                2 => Some(Route::Revision(segments[1].to_owned())),
                3 if segments[2] == "restore" => Some(Route::Restore(segments[1].to_owned())),
                _ => None,
            };
        }
        let rt = segments[0].parse::<TypeSegment>().ok()?.0;
        let owned = |i: usize| segments[i].to_owned();
        match n {
            1 => Some(Route::Collection(rt)),
            2 => Some(Route::Item(rt, owned(1))),
            // No relationship is named `revisions` (a test below keeps it so).
            3 if segments[2] == "revisions" => Some(Route::History(rt, owned(1))),
            3 => Some(Route::Related(rt, owned(1), owned(2))),
            _ if segments[2] == "relationships" => Some(Route::Relationship(rt, owned(1), owned(3))),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Route;

    fn shape(rest: &str) -> Option<String> {
        Route::of(rest).map(|r| match r {
            Route::Home => "home".into(),
            Route::Operations => "operations".into(),
            Route::Collection(rt) => format!("collection {}", rt.name),
            Route::Item(rt, id) => format!("item {} {id}", rt.name),
            Route::Related(rt, id, rel) => format!("related {} {id} {rel}", rt.name),
            Route::Relationship(rt, id, rel) => format!("relationship {} {id} {rel}", rt.name),
            Route::Feed => "feed".into(),
            Route::Revision(id) => format!("revision {id}"),
            Route::History(rt, id) => format!("history {} {id}", rt.name),
            Route::Restore(id) => format!("restore {id}"),
            Route::Stream => "stream".into(),
        })
    }

    #[test]
    fn paths_name_routes_as_warp_segments_would() {
        let some = |s: &str| Some(s.to_owned());
        assert_eq!(shape(""), some("home"));
        assert_eq!(shape("operations"), some("operations"));
        assert_eq!(shape("operations/"), some("operations"));
        assert_eq!(shape("subjects"), some("collection subjects"));
        assert_eq!(shape("subjects/"), some("collection subjects"));
        assert_eq!(shape("subjects/x%20y"), some("item subjects x%20y"), "segments are not decoded");
        assert_eq!(shape("subjects/1/module"), some("related subjects 1 module"));
        assert_eq!(shape("subjects/1/relationships"), some("related subjects 1 relationships"));
        assert_eq!(shape("subjects/1/relationships/chapters/"), some("relationship subjects 1 chapters"));
        assert_eq!(shape("revisions"), some("feed"));
        assert_eq!(shape("revisions/r1/"), some("revision r1"));
        assert_eq!(shape("chapters/1/revisions"), some("history chapters 1"));
        assert_eq!(shape("revisions/r1/restore"), some("restore r1"));
        assert_eq!(shape("revisions/stream"), some("stream"));
        assert!(crate::resources::TYPES.iter().all(|rt| rt.relationship("revisions").is_none()));
        for none in [
            "/",
            "subjects//",
            "/subjects",
            "subjects//1",
            "nothing",
            "nothing/1",
            "subjects/1/other/chapters",
            "subjects/1/relationships/chapters/more",
            "operations/1",
            "revisions/1/x",
            "revisions//",
        ] {
            assert_eq!(shape(none), None, "{none:?}");
        }
    }
}
