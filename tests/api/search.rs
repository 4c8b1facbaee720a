//! Full-text search (`filter[search]`): words without case or accents, prefixes, phrases,
//! several words, HTML not searchable; with filters, include, fields and paging; on related
//! endpoints; relevance; malformed searches. The index itself: `search_index.rs`.

use serde_json::{json, Value};

use crate::helpers::{on_both, one, Resp, TestApp, ATOMIC};

/// Titles of the resources of `r` (a collection), in order.
pub fn titles(r: &Resp) -> Vec<String> {
    r.assert_status(200);
    r.data().iter().map(|d| d["attributes"]["title"].as_str().unwrap_or("").to_owned()).collect()
}

pub async fn search(t: &TestApp, path: &str, text: &str) -> Vec<String> {
    let sep = if path.contains('?') { '&' } else { '?' };
    let q: String = form_urlencoded::byte_serialize(text.as_bytes()).collect();
    let r = t.get(&format!("{path}{sep}filter%5Bsearch%5D={q}")).await;
    let found = titles(&r);
    // Every search here fits on one page: the total is what it shows.
    assert_eq!(r.body["meta"]["page"]["total"], found.len(), "{path} {text}");
    found
}

/// A small catalogue: returns (module ids, subject ids).
pub async fn catalogue(t: &TestApp) -> (Vec<String>, Vec<String>) {
    let m1 = t
        .create(
            "modules",
            json!({"title": "Biology", "introduction": "Life and its chemistry",
                   "content": "<p>Plants use <b>photo</b>synthesis &amp; light.</p><script>var hidden = 'xylophone';</script><p title=\"secret\">R&eacute;sum&eacute; of cells</p>"}),
            Value::Null,
        )
        .await;
    let m2 =
        t.create("modules", json!({"title": "Physics", "introduction": "Light waves and optics"}), Value::Null).await;
    let rel = |m: &str| json!({"module": one("modules", m)});
    let s = [
        t.create("subjects", json!({"title": "Photosynthesis", "introduction": "How plants make sugar"}), rel(&m1))
            .await,
        t.create(
            "subjects",
            json!({"title": "Cell biology", "content": "The cell membrane. Photosynthesis happens in chloroplasts."}),
            rel(&m1),
        )
        .await,
        t.create(
            "subjects",
            json!({"title": "Résumé writing", "introduction": "For the CAFÉ job", "available_for_courses": true}),
            Value::Null,
        )
        .await,
        t.create(
            "subjects",
            json!({"title": "Optics", "content": "Light waves bend. Waves of light interfere."}),
            rel(&m2),
        )
        .await,
        t.create("subjects", json!({"title": "Light and waves", "available_for_courses": true}), rel(&m2)).await,
    ];
    t.chapter("Photons and light", &s[3], 1).await;
    t.chapter("Lenses", &s[3], 2).await;
    t.chapter("Light in plants", &s[0], 1).await;
    (vec![m1, m2], s.to_vec())
}

on_both!(words_match_without_case_or_accents_with_prefixes_and_phrases);
async fn words_match_without_case_or_accents_with_prefixes_and_phrases() {
    let t = TestApp::new().await;
    catalogue(&t).await;
    let s = "/v1/subjects?sort=title";
    assert_eq!(search(&t, s, "resume").await, ["Résumé writing"]);
    assert_eq!(search(&t, s, "RÉSUMÉ").await, ["Résumé writing"]);
    assert_eq!(search(&t, s, "cafe").await, ["Résumé writing"]);
    assert_eq!(search(&t, s, "photosynthesis").await, ["Cell biology", "Photosynthesis"]);
    assert_eq!(search(&t, s, "photo").await, Vec::<String>::new());
    assert_eq!(search(&t, s, "photo*").await, ["Cell biology", "Photosynthesis"]);
    assert_eq!(search(&t, s, "light waves").await, ["Light and waves", "Optics"]);
    assert_eq!(search(&t, s, "\"light waves\"").await, ["Optics"]);
    assert_eq!(search(&t, s, "\"waves of li\"*").await, ["Optics"]);
    assert_eq!(search(&t, s, "\"waves light\"").await, Vec::<String>::new());
    assert_eq!(search(&t, s, "light plants").await, Vec::<String>::new());
    assert_eq!(search(&t, s, "plants sugar").await, ["Photosynthesis"]);
    // Module content is HTML: the text is searchable, the markup is not.
    let m = "/v1/modules";
    assert_eq!(search(&t, m, "photosynthesis").await, ["Biology"]);
    assert_eq!(search(&t, m, "resume cells").await, ["Biology"]);
    for markup in ["xylophone", "secret", "amp", "eacute", "script", "p"] {
        assert_eq!(search(&t, m, markup).await, Vec::<String>::new(), "{markup}");
    }
    assert_eq!(search(&t, m, "light").await, ["Biology", "Physics"]);
    assert_eq!(search(&t, "/v1/chapters?sort=title", "light").await, ["Light in plants", "Photons and light"]);
}

on_both!(a_search_combines_with_filters_include_fields_and_paging);
async fn a_search_combines_with_filters_include_fields_and_paging() {
    let t = TestApp::new().await;
    let (modules, _) = catalogue(&t).await;
    let s = "/v1/subjects?sort=title&filter[available_for_courses]=true";
    assert_eq!(search(&t, s, "light").await, ["Light and waves"]);
    let r = t.get(&format!("/v1/subjects?filter[search]=light&filter[module]={}&sort=-title", modules[1])).await;
    assert_eq!(titles(&r), ["Optics", "Light and waves"]);
    // Paging: a page of one, with the total of the search.
    let r = t.get("/v1/subjects?filter[search]=light&sort=title&page[size]=1&page[number]=2").await;
    assert_eq!(titles(&r), ["Optics"]);
    assert_eq!(r.body["meta"]["page"]["total"], 2);
    assert_eq!(r.body["meta"]["page"]["lastPage"], 2);
    let next = r.body["links"]["prev"].as_str().unwrap();
    assert!(next.contains("filter[search]=light"), "{next}");
    // Include and sparse fieldsets; the excerpt is in each resource's meta.
    let r = t.get("/v1/subjects?filter[search]=photosynthesis&include=module&fields[subjects]=title,module&fields[modules]=title&sort=title").await;
    assert_eq!(titles(&r), ["Cell biology", "Photosynthesis"]);
    assert_eq!(r.body["included"].as_array().unwrap().len(), 1);
    assert_eq!(r.body["included"][0]["attributes"], json!({"title": "Biology"}));
    assert_eq!(r.data()[0]["attributes"], json!({"title": "Cell biology"}));
    assert_eq!(
        r.data()[0]["meta"]["search"],
        json!({"attribute": "content", "excerpt": "The cell membrane. <mark>Photosynthesis</mark> happens in chloroplasts."})
    );
    assert_eq!(r.data()[1]["meta"]["search"], json!({"attribute": "title", "excerpt": "<mark>Photosynthesis</mark>"}));
    // A module's excerpt is of its text, not its markup.
    let r = t.get("/v1/modules?filter[search]=photosynth*%20light").await;
    assert_eq!(
        r.data()[0]["meta"]["search"]["excerpt"],
        "Plants use <mark>photosynthesis</mark> &amp; <mark>light</mark>. Résumé of cells"
    );
    // Without a search there is no meta.
    assert!(t.get("/v1/subjects").await.data()[0].get("meta").is_none());
}

on_both!(related_endpoints_search_the_children_of_one_parent);
async fn related_endpoints_search_the_children_of_one_parent() {
    let t = TestApp::new().await;
    let (modules, subjects) = catalogue(&t).await;
    let r = t.get(&format!("/v1/modules/{}/subjects?filter[search]=photosynthesis&sort=title", modules[0])).await;
    assert_eq!(titles(&r), ["Cell biology", "Photosynthesis"]);
    assert_eq!(r.body["meta"]["page"]["total"], 2);
    let r = t.get(&format!("/v1/modules/{}/subjects?filter[search]=photosynthesis", modules[1])).await;
    assert_eq!(titles(&r), Vec::<String>::new());
    let r = t.get(&format!("/v1/subjects/{}/chapters?filter[search]=light", subjects[3])).await;
    assert_eq!(titles(&r), ["Photons and light"]);
    let r = t.get(&format!("/v1/subjects/{}/chapters?filter[search]=%22", subjects[3])).await;
    r.assert_error(400, "filter[search]");
}

on_both!(best_matches_come_first);
async fn best_matches_come_first() {
    let t = TestApp::new().await;
    let (_, subjects) = catalogue(&t).await;
    // Enough other subjects that a rare word's matches are few beside the table (an engine may
    // then read them another way than a common word's), some of them matching in the content.
    let ops: Vec<Value> = (0..100)
        .map(|i| {
            let content = if i % 10 == 0 { "filler on light" } else { "filler" };
            json!({"op": "add", "data": {"type": "subjects", "attributes": {"title": format!("Filler {i:03}"), "content": content}}})
        })
        .collect();
    let body = json!({ "atomic:operations": ops }).to_string();
    t.send(t.req("POST", "/v1/operations").header("content-type", ATOMIC).body(body)).await.assert_status(200);
    let r = t.get("/v1/subjects?filter[search]=light&page[size]=3&page[number]=2").await;
    assert_eq!(titles(&r), ["Filler 010", "Filler 020", "Filler 030"]);
    assert_eq!(r.body["meta"]["page"]["total"], 12);
    let r = t.get("/v1/subjects?filter[search]=filler&page[size]=2&page[number]=50").await;
    assert_eq!(titles(&r), ["Filler 098", "Filler 099"]);
    let r = t.get("/v1/subjects?filter[search]=filler%20light&page[size]=20").await;
    assert_eq!(titles(&r).len(), 10);
    // Without a sort: matches in the title first, then by id (creation order).
    assert_eq!(search(&t, "/v1/subjects", "photosynthesis").await, ["Photosynthesis", "Cell biology"]);
    assert_eq!(search(&t, "/v1/subjects?sort=-relevance", "photosynthesis").await, ["Photosynthesis", "Cell biology"]);
    // More terms in the title rank higher; ties by id.
    assert_eq!(search(&t, "/v1/subjects", "light waves").await, ["Light and waves", "Optics"]);
    let fillers = (0..100).step_by(10).map(|i| format!("Filler {i:03}"));
    let light: Vec<String> = ["Light and waves", "Optics"].map(String::from).into_iter().chain(fillers).collect();
    assert_eq!(search(&t, "/v1/subjects", "light").await, light);
    assert_eq!(search(&t, "/v1/subjects?sort=-relevance,id", "wave*").await, ["Light and waves", "Optics"]);
    // Another sort replaces relevance.
    assert_eq!(search(&t, "/v1/subjects?sort=id", "photosynthesis").await, ["Photosynthesis", "Cell biology"]);
    assert_eq!(search(&t, "/v1/subjects?sort=-id", "photosynthesis").await, ["Cell biology", "Photosynthesis"]);
    // On a related endpoint the search's order replaces the children's order.
    let r = t.get(&format!("/v1/subjects/{}/chapters?filter[search]=lenses%20OR%20photons", subjects[3])).await;
    assert_eq!(titles(&r), Vec::<String>::new());
}

on_both!(malformed_searches_and_relevance_without_a_search_are_400s);
async fn malformed_searches_and_relevance_without_a_search_are_400s() {
    let t = TestApp::new().await;
    catalogue(&t).await;
    let long = "a".repeat(201);
    let many_terms = "a b c d e f g h i";
    for bad in ["", "%20%20", "*", "a*", "%22open", "%22%22", "a*b", "-", "%22ab%22c", &long, many_terms, "%00"] {
        let r = t.get(&format!("/v1/subjects?filter[search]={}", bad.replace(' ', "%20"))).await;
        r.assert_error(400, "filter[search]");
    }
    for path in ["/v1/subjects?sort=-relevance", "/v1/modules?sort=title,-relevance", "/v1/chapters?sort=relevance"] {
        t.get(path).await.assert_error(400, "sort");
    }
    t.get("/v1/subjects?filter[search]=x&sort=relevance").await.assert_error(400, "sort");
    t.get("/v1/subjects?filter[search]=x&sort=-relevance,-relevance").await.assert_error(400, "sort");
    // Not on a single resource.
    let r = t.get("/v1/subjects").await;
    let id = r.data()[0]["id"].as_str().unwrap().to_owned();
    t.get(&format!("/v1/subjects/{id}?filter[search]=x")).await.assert_error(400, "filter[search]");
}
