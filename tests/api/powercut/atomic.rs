//! Transactions cut by the power: courses made in one `/v1/operations` request (a module,
//! three subjects in it and a chapter) and a module's subjects replaced through its
//! relationship. After each cut a course is all there or not at all, and a module's subjects
//! are the set acknowledged (or the one a write not acknowledged was making), never a mix.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{json, Value};

use super::cuts::{all, feed_replays_to, Draw, Rng, Round, Workload, TOKEN};
use crate::helpers::ATOMIC;
use crate::process::Server;

/// A course as acknowledged: its module, its three subjects (id, title), its chapter, and the
/// subjects its module holds now.
#[derive(Clone, Debug)]
pub struct Course {
    module: String,
    subjects: Vec<(String, String)>,
    chapter: String,
    linked: BTreeSet<String>,
}

#[derive(Debug)]
pub enum Did {
    /// A course made in one request: `Some` when acknowledged.
    Make { title: String, acked: Option<Course> },
    /// A module's subjects replaced by `to`.
    Relink { title: String, to: BTreeSet<String>, acked: bool },
}

/// Courses by title.
#[derive(Default)]
pub struct Courses {
    courses: BTreeMap<String, Course>,
}

fn course_operations(title: &str) -> Value {
    let module = json!({"type": "modules", "lid": "m"});
    let mut ops = vec![json!({"op": "add", "data": {"type": "modules", "lid": "m", "attributes": {"title": title}}})];
    for i in 1..=3 {
        ops.push(json!({"op": "add", "data": {"type": "subjects", "lid": format!("s{i}"),
            "attributes": {"title": format!("{title}/{i}")}, "relationships": {"module": {"data": module}}}}));
    }
    ops.push(
        json!({"op": "add", "data": {"type": "chapters", "attributes": {"title": format!("{title}/1/c"), "position": 1},
        "relationships": {"subject": {"data": {"type": "subjects", "lid": "s1"}}}}}),
    );
    json!({ "atomic:operations": ops })
}

fn made(title: &str, results: &Value) -> Course {
    let id = |i: usize| results["atomic:results"][i]["data"]["id"].as_str().expect("an id in the results").to_owned();
    let subjects: Vec<(String, String)> = (1..=3).map(|i| (id(i), format!("{title}/{i}"))).collect();
    let linked = subjects.iter().map(|(id, _)| id.clone()).collect();
    Course { module: id(0), subjects, chapter: id(4), linked }
}

impl Workload for Courses {
    type Log = Vec<Did>;

    fn client(&self, round: &Round, c: usize, name: &str, mut rng: Rng) -> Vec<Did> {
        let mut mine: Vec<(String, Course)> =
            self.courses.iter().skip(c).step_by(super::cuts::CLIENTS).map(|(t, k)| (t.clone(), k.clone())).collect();
        let mut log = Vec::new();
        for i in 0..25 {
            if round.stopped() {
                break;
            }
            if mine.is_empty() || rng.range(0, 9) < 5 {
                let title = format!("{name} n{i}");
                let answer = round.send_as(ATOMIC, "POST", "/v1/operations", Some(&course_operations(&title)));
                let acked = answer.map(|results| made(&title, &results));
                let done = acked.is_some();
                if let Some(course) = &acked {
                    mine.push((title.clone(), course.clone()));
                }
                log.push(Did::Make { title, acked });
                if !done {
                    break;
                }
            } else {
                let k = rng.range(0, mine.len() as u64 - 1) as usize;
                let (title, course) = &mut mine[k];
                let to: BTreeSet<String> =
                    course.subjects.iter().filter(|_| rng.range(0, 1) == 1).map(|(id, _)| id.clone()).collect();
                let data: Vec<Value> = to.iter().map(|id| json!({"type": "subjects", "id": id})).collect();
                let path = format!("/v1/modules/{}/relationships/subjects", course.module);
                let acked = round.send("PATCH", &path, Some(&json!({ "data": data }))).is_some();
                if acked {
                    course.linked = to.clone();
                }
                log.push(Did::Relink { title: title.clone(), to, acked });
                if !acked {
                    break;
                }
            }
        }
        log
    }

    fn verify(&mut self, server: &Server, logs: Vec<Vec<Did>>, round: usize) {
        // What each course's module may hold now, and the courses that may or may not exist.
        let mut allowed: BTreeMap<String, BTreeSet<BTreeSet<String>>> =
            self.courses.iter().map(|(t, k)| (t.clone(), BTreeSet::from([k.linked.clone()]))).collect();
        let mut maybe = BTreeSet::new();
        for did in logs.iter().flatten() {
            match did {
                Did::Make { title, acked: Some(course) } => {
                    allowed.insert(title.clone(), BTreeSet::from([course.linked.clone()]));
                    self.courses.insert(title.clone(), course.clone());
                }
                Did::Make { title, acked: None } => {
                    maybe.insert(title.clone());
                }
                Did::Relink { title, to, acked: true } => {
                    allowed.insert(title.clone(), BTreeSet::from([to.clone()]));
                }
                Did::Relink { title, to, acked: false } => {
                    allowed.get_mut(title).expect("a known course").insert(to.clone());
                }
            }
        }
        let titles = |kind: &str| -> BTreeMap<String, Vec<String>> {
            let mut by_title: BTreeMap<String, Vec<String>> = BTreeMap::new();
            for r in all(server, kind, "title") {
                let title = r["attributes"]["title"].as_str().unwrap().to_owned();
                by_title.entry(title).or_default().push(r["id"].as_str().unwrap().to_owned());
            }
            by_title
        };
        let (modules, subjects) = (titles("modules"), titles("subjects"));
        let linkage = |module: &str| -> BTreeSet<String> {
            let (status, body) =
                server.call("GET", &format!("/v1/modules/{module}/relationships/subjects"), TOKEN, None);
            assert_eq!(status, 200, "{body}");
            body["data"].as_array().unwrap().iter().map(|d| d["id"].as_str().unwrap().to_owned()).collect()
        };
        let chapters_of = |subject: &str| -> Vec<String> {
            let (status, body) = server.call("GET", &format!("/v1/subjects/{subject}/chapters"), TOKEN, None);
            assert_eq!(status, 200, "{body}");
            body["data"]
                .as_array()
                .unwrap()
                .iter()
                .map(|d| d["attributes"]["title"].as_str().unwrap().to_owned())
                .collect()
        };
        // Courses not acknowledged: all there, or nothing of them.
        for title in &maybe {
            let parts: Vec<Option<&Vec<String>>> = (1..=3).map(|i| subjects.get(&format!("{title}/{i}"))).collect();
            match modules.get(title) {
                Some(module) => {
                    assert_eq!(module.len(), 1, "cut {round}: course {title:?} made twice");
                    let ids: Vec<String> = parts
                        .iter()
                        .map(|p| match p.map(Vec::as_slice) {
                            Some([id]) => id.clone(),
                            _ => panic!("cut {round}: course {title:?} has its module but not its subjects: {parts:?}"),
                        })
                        .collect();
                    assert_eq!(chapters_of(&ids[0]), vec![format!("{title}/1/c")], "cut {round}: {title:?}'s chapter");
                    let chapter = {
                        let (_, body) = server.call("GET", &format!("/v1/subjects/{}/chapters", ids[0]), TOKEN, None);
                        body["data"][0]["id"].as_str().unwrap().to_owned()
                    };
                    let subjects: Vec<(String, String)> =
                        ids.iter().enumerate().map(|(i, id)| (id.clone(), format!("{title}/{}", i + 1))).collect();
                    let linked: BTreeSet<String> = ids.iter().cloned().collect();
                    allowed.insert(title.clone(), BTreeSet::from([linked.clone()]));
                    self.courses.insert(title.clone(), Course { module: module[0].clone(), subjects, chapter, linked });
                }
                None => assert!(
                    parts.iter().all(Option::is_none),
                    "cut {round}: course {title:?} has subjects without its module: {parts:?}"
                ),
            }
        }
        // Every course acknowledged: whole, and its module holds an allowed set of subjects.
        for (title, course) in &mut self.courses {
            assert_eq!(modules.get(title), Some(&vec![course.module.clone()]), "cut {round}: module of {title:?} lost");
            for (id, subject) in &course.subjects {
                assert_eq!(subjects.get(subject), Some(&vec![id.clone()]), "cut {round}: subject {subject:?} lost");
            }
            let (status, _) = server.call("GET", &format!("/v1/chapters/{}", course.chapter), TOKEN, None);
            assert_eq!(status, 200, "cut {round}: the chapter of {title:?} lost");
            let now = linkage(&course.module);
            let may = &allowed[title];
            assert!(
                may.contains(&now),
                "cut {round}: module {title:?} holds {now:?}, but may only hold one of {may:?}"
            );
            course.linked = now;
        }
        let known = |t: &String| self.courses.contains_key(t);
        assert!(modules.keys().all(known), "cut {round}: a module never made: {modules:?}");
        let subjects_by_id: BTreeMap<String, String> =
            subjects.into_iter().flat_map(|(t, ids)| ids.into_iter().map(move |id| (id, t.clone()))).collect();
        assert_eq!(subjects_by_id.len(), self.courses.len() * 3, "cut {round}: subjects of no course");
        feed_replays_to(server, &subjects_by_id, round);
    }

    fn acked(logs: &[Vec<Did>]) -> usize {
        logs.iter()
            .flatten()
            .filter(|d| matches!(d, Did::Make { acked: Some(_), .. } | Did::Relink { acked: true, .. }))
            .count()
    }
}
