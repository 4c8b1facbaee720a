//! What an operation names: resources created earlier in the request by their `lid`, and the
//! target of a `ref` or an `href`.

use std::collections::HashMap;

use serde_json::{Map, Value as Json};

use super::super::read::parse_id;
use super::super::related::relationship_named;
use crate::error::{Error, Problem, Result};
use crate::render::Base;
use crate::resources::{self, Relationship, ResourceType};

/// The resources created so far in this request, by `lid`.
#[derive(Default)]
pub struct Lids(pub HashMap<String, (&'static ResourceType, String)>);

impl Lids {
    /// The id of the resource of type `rt` that an earlier operation created as `lid`.
    pub fn resolve(&self, rt: &ResourceType, lid: &Json, pointer: &str) -> Result<String> {
        let Some(lid) = lid.as_str() else {
            return Err(Problem::malformed(pointer, "`lid` must be a string.").into());
        };
        match self.0.get(lid) {
            Some((t, id)) if t.name == rt.name => Ok(id.clone()),
            Some((t, _)) => Err(Error::conflict(
                pointer,
                format!("`lid` {lid} names one of the {}, not of the {}.", t.name, rt.name),
            )),
            None => Err(Error::not_found(format!(
                "No earlier operation of this request created a resource with `lid` {lid}."
            ))
            .within(pointer)),
        }
    }

    /// Replaces every `lid` of the resource identifiers in `linkage` (a relationship's `data`,
    /// at `pointer`) by the id it stands for.
    pub fn resolve_linkage(&self, rel: &Relationship, linkage: &mut Json, pointer: &str) -> Result<()> {
        match linkage {
            Json::Array(items) => {
                for (i, item) in items.iter_mut().enumerate() {
                    self.resolve_identifier(rel, item, &format!("{pointer}/{i}"))?;
                }
                Ok(())
            }
            item => self.resolve_identifier(rel, item, pointer),
        }
    }

    fn resolve_identifier(&self, rel: &Relationship, item: &mut Json, pointer: &str) -> Result<()> {
        let Some(obj) = item.as_object_mut() else { return Ok(()) };
        if obj.contains_key("id") {
            return Ok(());
        }
        let Some(lid) = obj.remove("lid") else { return Ok(()) };
        let id = self.resolve(rel.target(), &lid, &format!("{pointer}/lid"))?;
        obj.insert("id".into(), Json::String(id));
        Ok(())
    }

    /// Resolves the `lid`s in the relationships of resource object `data`.
    pub fn resolve_relationships(&self, rt: &ResourceType, data: &mut Map<String, Json>) -> Result<()> {
        let Some(Json::Object(rels)) = data.get_mut("relationships") else { return Ok(()) };
        for (name, value) in rels.iter_mut() {
            let (Some(rel), Some(linkage)) = (rt.relationship(name), value.get_mut("data")) else { continue };
            self.resolve_linkage(rel, linkage, &format!("/data/relationships/{}/data", escape(name)))?;
        }
        Ok(())
    }
}

/// What an operation acts on: a resource type (to add to), a resource, or a relationship.
pub struct Target {
    pub rt: &'static ResourceType,
    pub id: Option<String>,
    pub rel: Option<&'static Relationship>,
}

pub fn resource_type(name: &str, pointer: &str) -> Result<&'static ResourceType> {
    resources::by_name(name).ok_or_else(|| {
        let names: Vec<&str> = resources::TYPES.iter().map(|t| t.name).collect();
        Error::not_found(format!("There is no resource type `{name}`; there are {}.", names.join(", "))).within(pointer)
    })
}

/// `ref`: `{"type", "id" or "lid", "relationship"?}`.
pub fn reference(r: &Json, lids: &Lids, collection: bool) -> Result<Target> {
    let Some(r) = r.as_object() else {
        return Err(Problem::malformed("/ref", "`ref` must be an object with `type` and `id` (or `lid`).").into());
    };
    if let Some(name) = r.keys().find(|k| !["type", "id", "lid", "relationship"].contains(&k.as_str())) {
        return Err(
            Problem::malformed(format!("/ref/{}", escape(name)), format!("`ref` has no member `{name}`.")).into()
        );
    }
    let Some(type_name) = r.get("type").and_then(Json::as_str) else {
        return Err(Problem::malformed("/ref", "`ref` needs `type`, a string.").into());
    };
    let rt = resource_type(type_name, "/ref/type")?;
    let id = match (r.get("id"), r.get("lid")) {
        (Some(_), Some(_)) => return Err(Problem::malformed("/ref", "`ref` takes `id` or `lid`, not both.").into()),
        (Some(Json::String(id)), None) => Some(parse_id(rt, id).map_err(|e| e.within("/ref/id"))?),
        (Some(_), None) => return Err(Problem::malformed("/ref/id", "`id` must be a string.").into()),
        (None, Some(lid)) => Some(lids.resolve(rt, lid, "/ref/lid")?),
        (None, None) => None,
    };
    // A `ref` names a resource; only an `href` may name a collection (to add to).
    if id.is_none() && !collection {
        return Err(Problem::malformed("/ref", "`ref` needs the resource's `id` (or `lid`).").into());
    }
    let rel = match r.get("relationship") {
        None => None,
        Some(Json::String(name)) => Some(relationship_named(rt, name).map_err(|e| e.within("/ref/relationship"))?),
        Some(_) => return Err(Problem::malformed("/ref/relationship", "`relationship` must be a string.").into()),
    };
    Ok(Target { rt, id, rel })
}

/// `href`: the URL of a collection, resource or relationship, as the API serves it (absolute,
/// or a path from `/v1` or from the server's root).
pub fn href(h: &Json, base: &Base, lids: &Lids) -> Result<Target> {
    let Some(h) = h.as_str() else {
        return Err(Problem::malformed("/href", "`href` must be a string.").into());
    };
    let path = h.strip_prefix(base.as_str()).or_else(|| h.strip_prefix("/v1")).unwrap_or(h);
    let segments: Vec<&str> = path.trim_start_matches('/').split('/').collect();
    let not_served = || Error::not_found(format!("`href` {h} names nothing this API serves.")).within("/href");
    let mut r = Map::new();
    match segments[..] {
        [t] => {
            r.insert("type".into(), t.into());
        }
        [t, id] | [t, id, "relationships", _] => {
            r.insert("type".into(), t.into());
            r.insert("id".into(), id.into());
            if let [.., "relationships", rel] = segments[..] {
                r.insert("relationship".into(), rel.into());
            }
        }
        _ => return Err(not_served()),
    }
    reference(&Json::Object(r), lids, true).map_err(|_| not_served())
}

/// `name` as a JSON pointer segment.
pub fn escape(name: &str) -> String {
    name.replace('~', "~0").replace('/', "~1")
}
