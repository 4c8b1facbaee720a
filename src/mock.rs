//! The mock server's demo catalogue: a few modules, their subjects, some chapters.
//!
//! Loaded through the same validation and store code as API writes, in one transaction.

use serde_json::json;

use crate::jsonapi::body::{self, Mode};
use crate::resources::{ResourceType, CHAPTERS, MODULES, SUBJECTS};
use crate::store::write;
use crate::store::Db;

/// (title, available for courses, chapter titles)
type Subject = (&'static str, bool, &'static [&'static str]);

/// (module title, external id, content, subjects)
const CATALOGUE: &[(&str, &str, &str, &[Subject])] = &[
    (
        "Foundations of Programming",
        "MOD-PROG-101",
        "<p>Write your first programs and learn to think like a programmer.</p>",
        &[
            ("Variables and Types", true, &["What is a variable?", "Numbers and text", "Converting between types"]),
            ("Control Flow", true, &["If and else", "Loops"]),
            ("Functions", false, &[]),
        ],
    ),
    (
        "Web Development",
        "MOD-WEB-201",
        "<p>Build pages with <strong>HTML</strong> and <em>CSS</em>, then talk to servers.</p>",
        &[
            ("HTML Structure", true, &["Elements and attributes", "Semantic markup"]),
            ("Styling with CSS", true, &[]),
            ("HTTP and APIs", false, &["Requests and responses", "JSON:API in practice"]),
        ],
    ),
    (
        "Data Literacy",
        "MOD-DATA-110",
        "<p>Read tables and charts critically.</p>",
        &[("Reading Tables", true, &["Rows and columns"]), ("Charts that Tell the Truth", true, &[])],
    ),
];

/// Fills an empty database with the demo catalogue.
pub async fn seed(db: &Db) -> Result<(), String> {
    db.write(&crate::store::WriteContext::system("coursed"), |c| {
        let mut create = |rt: &'static ResourceType, doc: serde_json::Value| {
            let changes = body::resource(rt, doc.to_string().as_bytes(), Mode::Create)?;
            write::create(c, rt, &changes).map(|rec| rec.id)
        };
        let link = |ty: &str, id: &str| json!({"data": {"type": ty, "id": id}});
        for (title, external_id, content, subjects) in CATALOGUE {
            let module = create(
                &MODULES,
                json!({"data": {"type": "modules", "attributes": {
                    "title": title, "introduction": format!("An introduction to {}.", title.to_lowercase()),
                    "content": content, "external_id": external_id}}}),
            )?;
            for (i, (title, available, chapters)) in subjects.iter().enumerate() {
                let subject = create(
                    &SUBJECTS,
                    json!({"data": {"type": "subjects",
                        "attributes": {"title": title, "introduction": format!("In this subject: {title}."),
                            "content": "", "external_id": format!("{external_id}-S{}", i + 1),
                            "available_for_courses": available},
                        "relationships": {"module": link("modules", &module)}}}),
                )?;
                for (position, title) in chapters.iter().enumerate() {
                    create(
                        &CHAPTERS,
                        json!({"data": {"type": "chapters",
                            "attributes": {"title": title, "content": format!("<p>{title}</p>"), "position": position},
                            "relationships": {"subject": link("subjects", &subject)}}}),
                    )?;
                }
            }
        }
        create(
            &SUBJECTS,
            json!({"data": {"type": "subjects", "attributes": {"title": "Study Skills", "content": "Not yet part of a module."}}}),
        )?;
        Ok(())
    })
    .await
    .map_err(|e| format!("cannot load the demo catalogue: {e}"))
}
