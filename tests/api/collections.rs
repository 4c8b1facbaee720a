//! Paging, sorting and filtering of collections and of to-many related endpoints.

use serde_json::{json, Value};

use crate::helpers::{on_both, one, TestApp};

/// `n` subjects titled "S00".."S{n-1}" in module `m` (created in id order).
async fn subjects(t: &TestApp, n: usize, m: Option<&str>) -> Vec<String> {
    let mut ids = Vec::new();
    for i in 0..n {
        ids.push(t.subject(&format!("S{i:02}"), m).await);
    }
    ids
}

on_both!(collections_are_paged_by_20_with_meta_and_links);
async fn collections_are_paged_by_20_with_meta_and_links() {
    let t = TestApp::new().await;
    let ids = subjects(&t, 45, None).await;
    let r = t.get("/v1/subjects").await;
    r.assert_status(200);
    assert_eq!(r.ids(), ids[..20].to_vec(), "default order is id ascending, which is creation order");
    assert_eq!(
        r.body["meta"]["page"],
        json!({"currentPage": 1, "perPage": 20, "from": 1, "to": 20, "total": 45, "lastPage": 3})
    );
    let links = &r.body["links"];
    assert_eq!(links["self"], "http://localhost:8080/v1/subjects");
    assert_eq!(links["first"], "http://localhost:8080/v1/subjects?page%5Bnumber%5D=1");
    assert_eq!(links["last"], "http://localhost:8080/v1/subjects?page%5Bnumber%5D=3");
    assert_eq!(links["next"], "http://localhost:8080/v1/subjects?page%5Bnumber%5D=2");
    assert!(links.get("prev").is_none());

    let r = t.get("/v1/subjects?page[number]=3").await;
    assert_eq!(r.ids(), ids[40..].to_vec());
    assert_eq!(r.body["meta"]["page"]["from"], 41);
    assert_eq!(r.body["meta"]["page"]["to"], 45);
    assert!(r.body["links"].get("next").is_none());
    assert_eq!(r.body["links"]["prev"], "http://localhost:8080/v1/subjects?page%5Bnumber%5D=2");
}

on_both!(paging_links_keep_the_other_parameters);
async fn paging_links_keep_the_other_parameters() {
    let t = TestApp::new().await;
    subjects(&t, 5, None).await;
    let r = t
        .get("/v1/subjects?sort=-title&page%5Bsize%5D=2&page%5Bnumber%5D=2&filter%5Bavailable_for_courses%5D=false")
        .await;
    let links = &r.body["links"];
    assert_eq!(
        links["self"],
        "http://localhost:8080/v1/subjects?sort=-title&page%5Bsize%5D=2&page%5Bnumber%5D=2&filter%5Bavailable_for_courses%5D=false"
    );
    for (name, n) in [("first", 1), ("prev", 1), ("next", 3), ("last", 3)] {
        assert_eq!(
            links[name],
            format!("http://localhost:8080/v1/subjects?sort=-title&page%5Bsize%5D=2&filter%5Bavailable_for_courses%5D=false&page%5Bnumber%5D={n}"),
            "{name}"
        );
    }
    let next = t.get(links["next"].as_str().unwrap().trim_start_matches("http://localhost:8080")).await;
    assert_eq!(next.body["data"][0]["attributes"]["title"], "S00");
}

on_both!(a_page_past_the_end_is_empty_and_an_empty_collection_has_one_page);
async fn a_page_past_the_end_is_empty_and_an_empty_collection_has_one_page() {
    let t = TestApp::new().await;
    let r = t.get("/v1/modules").await;
    assert_eq!(r.body["data"], json!([]));
    assert_eq!(
        r.body["meta"]["page"],
        json!({"currentPage": 1, "perPage": 20, "from": 0, "to": 0, "total": 0, "lastPage": 1})
    );
    t.module("Only").await;
    let r = t.get("/v1/modules?page[number]=7").await;
    r.assert_status(200);
    assert_eq!(r.body["data"], json!([]));
    assert_eq!(r.body["meta"]["page"]["from"], 0);
    assert_eq!(r.body["links"]["prev"], "http://localhost:8080/v1/modules?page%5Bnumber%5D=1");
    let r = t.get("/v1/modules?page[number]=18446744073709551615").await;
    r.assert_status(200);
}

on_both!(paging_parameters_out_of_bounds_are_400_naming_the_parameter);
async fn paging_parameters_out_of_bounds_are_400_naming_the_parameter() {
    let t = TestApp::new().await;
    for (query, param) in [
        ("page[size]=0", "page[size]"),
        ("page[size]=101", "page[size]"),
        ("page[size]=ten", "page[size]"),
        ("page[number]=0", "page[number]"),
        ("page[number]=-1", "page[number]"),
        ("page[number]=1.5", "page[number]"),
        // Whole numbers as digits only: links would repeat a sign or spaces as sent.
        ("page[size]=%2B5", "page[size]"),
        ("page[number]=%201", "page[number]"),
        ("page[size]=", "page[size]"),
        ("page[cursor]=x", "page[cursor]"),
        ("page[size]=1&page[size]=2", "page[size]"),
    ] {
        t.get(&format!("/v1/subjects?{query}")).await.assert_error(400, param);
    }
    let r = t.get("/v1/subjects?page[size]=100").await;
    r.assert_status(200);
    assert_eq!(r.body["meta"]["page"]["perPage"], 100);
}

on_both!(sort_takes_several_fields_and_descending_with_id_as_tie_breaker);
async fn sort_takes_several_fields_and_descending_with_id_as_tie_breaker() {
    let t = TestApp::new().await;
    let a1 = t.create("subjects", json!({"title": "A", "external_id": "z"}), Value::Null).await;
    let b = t.create("subjects", json!({"title": "B", "external_id": "y"}), Value::Null).await;
    let a2 = t.create("subjects", json!({"title": "A", "external_id": "x"}), Value::Null).await;
    assert_eq!(t.get("/v1/subjects?sort=title").await.ids(), vec![a1.clone(), a2.clone(), b.clone()]);
    assert_eq!(t.get("/v1/subjects?sort=-title").await.ids(), vec![b.clone(), a1.clone(), a2.clone()]);
    assert_eq!(t.get("/v1/subjects?sort=title,-external_id").await.ids(), vec![a1.clone(), a2.clone(), b.clone()]);
    assert_eq!(t.get("/v1/subjects?sort=title,external_id").await.ids(), vec![a2.clone(), a1.clone(), b.clone()]);
    assert_eq!(t.get("/v1/subjects?sort=-id").await.ids(), vec![a2.clone(), b.clone(), a1.clone()]);
    assert_eq!(t.get("/v1/subjects?sort=id").await.ids(), vec![a1.clone(), b.clone(), a2.clone()]);
    assert_eq!(t.get("/v1/subjects?sort=-created_at,title").await.ids().len(), 3);
    t.get("/v1/subjects?sort=colour").await.assert_error(400, "sort");
    t.get("/v1/subjects?sort=title,title").await.assert_error(400, "sort");
    t.get("/v1/chapters?sort=external_id").await.assert_error(400, "sort");
}

on_both!(filter_by_id_accepts_all_three_syntaxes);
async fn filter_by_id_accepts_all_three_syntaxes() {
    let t = TestApp::new().await;
    let ids = subjects(&t, 4, None).await;
    let expected = vec![ids[1].clone(), ids[3].clone()];
    for q in [
        format!("filter[id]={},{}", ids[3], ids[1]),
        format!("filter%5Bid%5D%5B%5D={}&filter%5Bid%5D%5B%5D={}", ids[1], ids[3]),
        format!("filter[id]={}&filter[id]={}", ids[1], ids[3]),
        format!("filter[id]={},not-a-uuid,{},{}", ids[1], ids[3], uuid::Uuid::now_v7()),
        format!("filter[id]={}", ids[1].to_uppercase()) + &format!(",{}", ids[3]),
    ] {
        let r = t.get(&format!("/v1/subjects?{q}")).await;
        assert_eq!(r.ids(), expected, "{q}");
        assert_eq!(r.body["meta"]["page"]["total"], 2, "{q}");
    }
    let r = t.get("/v1/subjects?filter[id]=nothing").await;
    assert_eq!(r.body["data"], json!([]));
    let many: Vec<String> = (0..101).map(|_| uuid::Uuid::now_v7().to_string()).collect();
    t.get(&format!("/v1/subjects?filter[id]={}", many.join(","))).await.assert_error(400, "filter[id]");
}

on_both!(filters_by_external_id_module_and_availability);
async fn filters_by_external_id_module_and_availability() {
    let t = TestApp::new().await;
    let m = t.module("M").await;
    let a = t
        .create(
            "subjects",
            json!({"title": "A", "external_id": "EXT-A", "available_for_courses": true}),
            json!({"module": one("modules", &m)}),
        )
        .await;
    let b = t
        .create("subjects", json!({"title": "B", "external_id": "ext-a"}), json!({"module": one("modules", &m)}))
        .await;
    let c = t.create("subjects", json!({"title": "C", "available_for_courses": true}), Value::Null).await;
    assert_eq!(
        t.get("/v1/subjects?filter[external_id]=EXT-A").await.ids(),
        vec![a.clone()],
        "exact and case-sensitive"
    );
    let r = t.get(&format!("/v1/subjects?filter[module]={m}")).await;
    assert_eq!(r.ids(), vec![a.clone(), b.clone()]);
    assert_eq!(r.body["meta"]["page"]["total"], 2);
    assert_eq!(t.get("/v1/subjects?filter[available_for_courses]=true").await.ids(), vec![a.clone(), c.clone()]);
    assert_eq!(t.get("/v1/subjects?filter[available_for_courses]=false").await.ids(), vec![b.clone()]);
    let r = t.get(&format!("/v1/subjects?filter[module]={m}&filter[available_for_courses]=true")).await;
    assert_eq!(r.ids(), vec![a.clone()]);
    assert_eq!(r.body["meta"]["page"]["total"], 1);
    assert_eq!(t.get("/v1/subjects?filter[module]=not-an-id").await.body["data"], json!([]));
    assert_eq!(t.get("/v1/modules?filter[external_id]=none").await.body["data"], json!([]));
    t.get("/v1/subjects?filter[available_for_courses]=yes").await.assert_error(400, "filter[available_for_courses]");
    t.get("/v1/subjects?filter[title]=A").await.assert_error(400, "filter[title]");
    t.get("/v1/modules?filter[module]=x").await.assert_error(400, "filter[module]");
}

on_both!(unknown_query_parameters_are_400_and_all_are_reported);
async fn unknown_query_parameters_are_400_and_all_are_reported() {
    let t = TestApp::new().await;
    let r = t.get("/v1/subjects?colour=red&page[size]=0").await;
    r.assert_error(400, "colour");
    assert_eq!(r.body["errors"].as_array().unwrap().len(), 2, "{}", r.body);
    let m = t.module("M").await;
    t.get(&format!("/v1/modules/{m}?page[size]=2")).await.assert_error(400, "page[size]");
    t.get(&format!("/v1/modules/{m}/relationships/subjects?sort=id")).await.assert_error(400, "sort");
}

on_both!(to_many_related_endpoints_page_sort_and_filter_like_collections);
async fn to_many_related_endpoints_page_sort_and_filter_like_collections() {
    let t = TestApp::new().await;
    let m = t.module("M").await;
    let other = t.module("Other").await;
    let ids = subjects(&t, 7, Some(&m)).await;
    subjects(&t, 3, Some(&other)).await;
    let path = format!("/v1/modules/{m}/subjects");
    let r = t.get(&format!("{path}?page[size]=3&page[number]=3&sort=-title")).await;
    r.assert_status(200);
    assert_eq!(r.ids(), vec![ids[0].clone()]);
    assert_eq!(r.body["meta"]["page"]["total"], 7);
    assert_eq!(r.body["meta"]["page"]["lastPage"], 3);
    assert!(r.body["links"]["first"].as_str().unwrap().starts_with(&format!("http://localhost:8080{path}?")));
    let r = t.get(&format!("{path}?filter[id]={},{}", ids[2], ids[5])).await;
    assert_eq!(r.ids(), vec![ids[2].clone(), ids[5].clone()]);
    t.get(&format!("{path}?filter[colour]=red")).await.assert_error(400, "filter[colour]");
    t.get(&format!("/v1/modules/{}/subjects", uuid::Uuid::now_v7())).await.assert_problem(404);
}

on_both!(counts_follow_moves_and_deletes);
async fn counts_follow_moves_and_deletes() {
    let t = TestApp::new().await;
    let m1 = t.module("M1").await;
    let m2 = t.module("M2").await;
    let s = subjects(&t, 3, Some(&m1)).await;
    let total = |r: crate::helpers::Resp| r.body["meta"]["page"]["total"].clone();
    let body = json!({"data": {"type": "subjects", "id": s[0], "relationships": {"module": one("modules", &m2)}}});
    t.write("PATCH", &format!("/v1/subjects/{}", s[0]), body).await.assert_status(200);
    assert_eq!(total(t.get(&format!("/v1/modules/{m1}/subjects")).await), 2);
    assert_eq!(total(t.get(&format!("/v1/subjects?filter[module]={m2}")).await), 1);
    t.delete(&format!("/v1/subjects/{}", s[1])).await.assert_status(204);
    assert_eq!(total(t.get(&format!("/v1/modules/{m1}/subjects")).await), 1);
    assert_eq!(total(t.get("/v1/subjects").await), 2);
    t.delete(&format!("/v1/modules/{m1}")).await.assert_status(204);
    assert_eq!(total(t.get("/v1/subjects").await), 2);
    assert_eq!(total(t.get("/v1/modules").await), 1);
}

/// The page index's generation of `table`, read from the database.
async fn generation(t: &TestApp, table: &str) -> i64 {
    let sql = "SELECT CAST(sum(gen) AS BIGINT) FROM row_counts WHERE tbl = ? AND parent = ''";
    t.sql_i64(sql, vec![coursed::store::Value::Text(table.into())]).await
}

async fn all_ids(t: &TestApp) -> Vec<String> {
    let mut all = Vec::new();
    for n in 1.. {
        let r = t.get(&format!("/v1/subjects?page[size]=100&page[number]={n}")).await;
        if r.data().is_empty() {
            break;
        }
        all.extend(r.ids());
    }
    all
}

on_both!(deep_pages_are_the_same_with_and_without_the_page_index);
async fn deep_pages_are_the_same_with_and_without_the_page_index() {
    let shape = coursed::dataset::Shape { modules: 2, subjects_per_module: 400, chapters_per_subject: 0, seed: 7 };
    let t = TestApp::generated(shape).await;
    let mut all = all_ids(&t).await;
    assert_eq!(all.len(), 800);
    assert!(all.windows(2).all(|w| w[0] < w[1]), "id order");
    // Deep pages asked for above start a background build of the index; wait for it.
    let gen = generation(&t, "subjects").await;
    for _ in 0..500 {
        if t.app.db.pages().start("subjects", gen, 700).is_some() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    assert!(t.app.db.pages().start("subjects", gen, 700).is_some(), "the page index was built");
    let check = |all: Vec<String>| {
        let t = &t;
        async move {
            for (size, number) in [(7u64, 40u64), (100, 5), (13, 54), (100, 8), (1, 800), (20, 13)] {
                let r = t.get(&format!("/v1/subjects?page[size]={size}&page[number]={number}")).await;
                let from = ((number - 1) * size) as usize;
                let expected: Vec<String> = all.iter().skip(from).take(size as usize).cloned().collect();
                assert_eq!(r.ids(), expected, "page {number} of {size}");
                assert_eq!(r.body["meta"]["page"]["total"], all.len());
            }
        }
    };
    check(all.clone()).await;
    // Inserts and deletes move the generation: the stale index is not used.
    let removed = all.remove(300);
    t.delete(&format!("/v1/subjects/{removed}")).await.assert_status(204);
    all.push(t.subject("Newest", None).await);
    assert_ne!(generation(&t, "subjects").await, gen);
    check(all).await;
}

on_both!(deep_sorted_pages_step_over_their_offset_by_the_keys_alone);
/// Past the first pages a sorted page steps over its offset by the keys alone, then reads its
/// rows: the same rows, in the same order, as the whole order read in full.
async fn deep_sorted_pages_step_over_their_offset_by_the_keys_alone() {
    let shape = coursed::dataset::Shape { modules: 2, subjects_per_module: 300, chapters_per_subject: 0, seed: 11 };
    let t = TestApp::generated(shape).await;
    let mut rows: Vec<(String, String, String)> = Vec::new();
    for n in 1..=6 {
        let r = t.get(&format!("/v1/subjects?page[size]=100&page[number]={n}")).await;
        for d in r.data() {
            let title = d["attributes"]["title"].as_str().unwrap().to_owned();
            let module = d["relationships"]["module"]["data"]["id"].as_str().unwrap().to_owned();
            rows.push((title, d["id"].as_str().unwrap().to_owned(), module));
        }
    }
    assert_eq!(rows.len(), 600);
    let mut by_title_desc: Vec<String> = {
        let mut r = rows.clone();
        // Titles descending, ties by id ascending (the contract's tie-breaker).
        r.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.cmp(&b.1)));
        r.into_iter().map(|(_, id, _)| id).collect()
    };
    for (size, number) in [(100u64, 3u64), (100, 6), (7, 40), (1, 600), (13, 46), (50, 12)] {
        let r = t.get(&format!("/v1/subjects?sort=-title&page[size]={size}&page[number]={number}")).await;
        let from = ((number - 1) * size) as usize;
        let expected: Vec<String> = by_title_desc.iter().skip(from).take(size as usize).cloned().collect();
        assert_eq!(r.ids(), expected, "sort=-title, page {number} of {size}");
    }
    // Within one parent, in ascending order.
    let module = rows[0].2.clone();
    let mut children: Vec<(String, String, String)> = rows.iter().filter(|r| r.2 == module).cloned().collect();
    children.sort();
    let children: Vec<String> = children.into_iter().map(|(_, id, _)| id).collect();
    assert_eq!(children.len(), 300);
    let r = t.get(&format!("/v1/modules/{module}/subjects?sort=title&page[size]=20&page[number]=14")).await;
    assert_eq!(r.ids(), children[260..280].to_vec(), "a parent's children, deep page");
    // The same order after a title changed (nothing is cached across writes).
    let first = by_title_desc.remove(0);
    let body = serde_json::json!({"data": {"type": "subjects", "id": first, "attributes": {"title": "!"}}});
    t.write("PATCH", &format!("/v1/subjects/{first}"), body).await.assert_status(200);
    by_title_desc.push(first);
    let r = t.get("/v1/subjects?sort=-title&page[size]=10&page[number]=60").await;
    assert_eq!(r.ids(), by_title_desc[590..600].to_vec(), "the last page, after a title changed");
}

on_both!(deep_pages_of_an_order_whose_first_key_ties_start_inside_the_group);
/// A deep page whose first sort key is shared by many rows (a chapter's position, a generated
/// catalogue's one creation time) starts inside that key's group: the same rows, in the same
/// order, as the whole order computed here, for either direction of the first key and any
/// later keys, in either half of the order (walked from its nearer end), on the whole table,
/// within a parent and within a filter.
async fn deep_pages_of_an_order_whose_first_key_ties_start_inside_the_group() {
    let shape = coursed::dataset::Shape { modules: 2, subjects_per_module: 300, chapters_per_subject: 2, seed: 5 };
    let t = TestApp::generated(shape).await;
    // (id, title, position, created_at, subject)
    let mut rows: Vec<(String, String, i64, String, String)> = Vec::new();
    for n in 1..=12 {
        let r = t.get(&format!("/v1/chapters?page[size]=100&page[number]={n}")).await;
        for d in r.data() {
            let a = &d["attributes"];
            rows.push((
                d["id"].as_str().unwrap().to_owned(),
                a["title"].as_str().unwrap().to_owned(),
                a["position"].as_i64().unwrap(),
                a["created_at"].as_str().unwrap().to_owned(),
                d["relationships"]["subject"]["data"]["id"].as_str().unwrap().to_owned(),
            ));
        }
    }
    assert_eq!(rows.len(), 1200);
    let positions: std::collections::BTreeSet<i64> = rows.iter().map(|r| r.2).collect();
    assert!(positions.len() < 10, "positions are shared by many chapters: {positions:?}");
    type Row = (String, String, i64, String, String);
    type Order = fn(&Row, &Row) -> std::cmp::Ordering;
    let orders: [(&str, Order); 7] = [
        ("position", |a, b| a.2.cmp(&b.2).then(a.0.cmp(&b.0))),
        ("title", |a, b| a.1.cmp(&b.1).then(a.0.cmp(&b.0))),
        ("-position", |a, b| b.2.cmp(&a.2).then(a.0.cmp(&b.0))),
        ("position,-title", |a, b| a.2.cmp(&b.2).then(b.1.cmp(&a.1)).then(a.0.cmp(&b.0))),
        ("-position,title", |a, b| b.2.cmp(&a.2).then(a.1.cmp(&b.1)).then(a.0.cmp(&b.0))),
        ("-title", |a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0))),
        ("-created_at,-position,-id", |a, b| b.3.cmp(&a.3).then(b.2.cmp(&a.2)).then(b.0.cmp(&a.0))),
    ];
    for (sort, cmp) in orders {
        let mut all = rows.clone();
        all.sort_by(cmp);
        let all: Vec<String> = all.into_iter().map(|r| r.0).collect();
        for (size, number) in [(100u64, 3u64), (100, 12), (7, 40), (1, 1200), (13, 46), (50, 12), (30, 20), (97, 7)] {
            let path = format!("/v1/chapters?sort={sort}&page[size]={size}&page[number]={number}");
            let from = ((number - 1) * size) as usize;
            let expected: Vec<String> = all.iter().skip(from).take(size as usize).cloned().collect();
            assert_eq!(t.get(&path).await.ids(), expected, "{path}");
        }
    }
    // Within a parent and within a filter.
    let mut subjects: Vec<(String, String, String, bool, String)> = Vec::new();
    for n in 1..=6 {
        for d in t.get(&format!("/v1/subjects?page[size]=100&page[number]={n}")).await.data() {
            subjects.push((
                d["id"].as_str().unwrap().to_owned(),
                d["attributes"]["title"].as_str().unwrap().to_owned(),
                d["relationships"]["module"]["data"]["id"].as_str().unwrap().to_owned(),
                d["attributes"]["available_for_courses"].as_bool().unwrap(),
                d["attributes"]["created_at"].as_str().unwrap().to_owned(),
            ));
        }
    }
    let module = subjects[0].2.clone();
    let mut children: Vec<_> = subjects.iter().filter(|s| s.2 == module).collect();
    children.sort_by(|a, b| b.4.cmp(&a.4).then(b.1.cmp(&a.1)).then(a.0.cmp(&b.0)));
    let path = format!("/v1/modules/{module}/subjects?sort=-created_at,-title&page[size]=20&page[number]=14");
    let want: Vec<String> = children.iter().skip(260).take(20).map(|s| s.0.clone()).collect();
    assert_eq!(want.len(), 20);
    assert_eq!(t.get(&path).await.ids(), want, "{path}");
    let mut available: Vec<_> = subjects.iter().filter(|s| s.3).collect();
    assert!(available.len() > 270, "{} subjects available", available.len());
    available.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    let path = "/v1/subjects?filter[available_for_courses]=true&sort=-title&page[size]=10&page[number]=27";
    let want: Vec<String> = available.iter().skip(260).take(10).map(|s| s.0.clone()).collect();
    assert_eq!(t.get(path).await.ids(), want, "{path}");
}

/// Follows `links.next` from `path`, checking `meta.page.total` on every page; returns the ids
/// in order.
async fn every_page(t: &TestApp, path: &str, total: usize) -> Vec<String> {
    let mut ids = Vec::new();
    let mut next = Some(path.to_owned());
    while let Some(path) = next {
        let r = t.get(&path).await;
        r.assert_status(200);
        assert_eq!(r.body["meta"]["page"]["total"], total, "{path}");
        ids.extend(r.ids());
        next = r.body["links"]["next"].as_str().map(|l| l.trim_start_matches("http://localhost:8080").to_owned());
    }
    ids
}

on_both!(filter_null_on_a_to_one_lists_the_resources_without_one);
async fn filter_null_on_a_to_one_lists_the_resources_without_one() {
    let t = TestApp::new().await;
    let (m1, m2) = (t.module("M1").await, t.module("M2").await);
    // 24 subjects, in turn in M1, in no module, in M2; every other one available; titles
    // descending as they are created.
    let (mut with, mut without, mut available_without) = (Vec::new(), Vec::new(), Vec::new());
    for i in 0..24 {
        let module = [Some(&m1), None, Some(&m2)][i % 3];
        let rels = module.map_or(Value::Null, |m| json!({"module": one("modules", m)}));
        let attrs = json!({"title": format!("S{:02}", 23 - i), "available_for_courses": i % 2 == 1});
        let id = t.create("subjects", attrs, rels).await;
        match module {
            Some(_) => with.push(id),
            None if i % 2 == 1 => {
                available_without.push(id.clone());
                without.push(id);
            }
            None => without.push(id),
        }
    }
    assert_eq!((without.len(), available_without.len()), (8, 4));

    // Paged: the total on every page, the links keep the filter.
    let first = t.get("/v1/subjects?filter%5Bmodule%5D=null&page%5Bsize%5D=3").await;
    assert_eq!(
        first.body["meta"]["page"],
        json!({"currentPage": 1, "perPage": 3, "from": 1, "to": 3, "total": 8, "lastPage": 3})
    );
    assert_eq!(
        first.body["links"]["last"],
        "http://localhost:8080/v1/subjects?filter%5Bmodule%5D=null&page%5Bsize%5D=3&page%5Bnumber%5D=3"
    );
    assert_eq!(every_page(&t, "/v1/subjects?filter%5Bmodule%5D=null&page%5Bsize%5D=3", 8).await, without);
    let r = t.get("/v1/subjects?filter[module]=null").await;
    assert!(r.data().iter().all(|d| d["relationships"]["module"]["data"].is_null()), "{}", r.body);
    // Trimmed like an id; any other spelling is not an id and matches nothing.
    assert_eq!(t.get("/v1/subjects?filter[module]=%20null%20").await.ids(), without);
    for other in ["NULL", "Null", "nul", "null,null", "%00"] {
        let r = t.get(&format!("/v1/subjects?filter[module]={other}")).await;
        assert_eq!(r.body["data"], json!([]), "{other}");
        assert_eq!(r.body["meta"]["page"]["total"], 0, "{other}");
    }

    // With the other filters.
    let r = t.get("/v1/subjects?filter[module]=null&filter[available_for_courses]=true&page[size]=3").await;
    assert_eq!(r.ids(), available_without[..3].to_vec());
    assert_eq!(r.body["meta"]["page"]["total"], 4);
    let r =
        t.get(&format!("/v1/subjects?filter[module]=null&filter[id]={},{},{}", with[0], without[2], without[5])).await;
    assert_eq!(r.ids(), vec![without[2].clone(), without[5].clone()]);
    assert_eq!(r.body["meta"]["page"]["total"], 2);
    let r = t.get(&format!("/v1/subjects?filter[module]=null&filter[id]={}", with[1])).await;
    assert_eq!(r.body["meta"]["page"]["total"], 0);

    // Sorted, a page in the middle.
    let by_title: Vec<String> = without.iter().rev().cloned().collect();
    let r = t.get("/v1/subjects?filter[module]=null&sort=title&page[size]=3&page[number]=2").await;
    assert_eq!(r.ids(), by_title[3..6].to_vec());
    assert_eq!(r.body["meta"]["page"]["total"], 8);
    let r = t.get("/v1/subjects?filter[module]=null&sort=-id&page[size]=5&page[number]=2").await;
    assert_eq!(r.ids(), by_title[5..].to_vec());

    // Include and sparse fieldsets: nothing to include through `module`, chapters as usual.
    let chapter = t.chapter("C", &without[0], 0).await;
    t.chapter("Elsewhere", &with[0], 0).await;
    let r = t
        .get("/v1/subjects?filter[module]=null&include=module,chapters&fields[subjects]=title,module&page[size]=2")
        .await;
    assert_eq!(r.ids(), without[..2].to_vec());
    let included: Vec<&str> =
        r.body["included"].as_array().unwrap().iter().map(|v| v["id"].as_str().unwrap()).collect();
    assert_eq!(included, [chapter.as_str()]);
    assert_eq!(r.data()[0]["attributes"], json!({"title": "S22"}));
    assert_eq!(r.data()[0]["relationships"]["module"]["data"], Value::Null);

    // On a related endpoint: a module's subjects all have a module.
    let r = t.get(&format!("/v1/modules/{m1}/subjects?filter[module]=null")).await;
    assert_eq!(r.body["data"], json!([]));
    assert_eq!(r.body["meta"]["page"]["total"], 0);
    // And on modules there is no such filter.
    t.get("/v1/modules?filter[module]=null").await.assert_error(400, "filter[module]");
}

on_both!(filter_null_on_a_relationship_every_resource_has_is_an_empty_page);
async fn filter_null_on_a_relationship_every_resource_has_is_an_empty_page() {
    let t = TestApp::new().await;
    let s = t.subject("S", None).await;
    for i in 0..3 {
        t.chapter(&format!("C{i}"), &s, i).await;
    }
    for path in [
        "/v1/chapters?filter[subject]=null".to_owned(),
        "/v1/chapters?filter[subject]=null&sort=-position&page[size]=2&include=subject".to_owned(),
        format!("/v1/subjects/{s}/chapters?filter[subject]=null"),
    ] {
        let r = t.get(&path).await;
        r.assert_status(200);
        assert_eq!(r.body["data"], json!([]), "{path}");
        assert_eq!(r.body["meta"]["page"]["total"], 0, "{path}");
        assert_eq!(r.body["meta"]["page"]["lastPage"], 1, "{path}");
        assert!(r.body.get("included").is_none_or(|i| i == &json!([])), "{path}");
    }
    assert_eq!(t.get("/v1/chapters").await.body["meta"]["page"]["total"], 3);
}

/// The subjects without a module (one page), checking the total.
async fn without_module(t: &TestApp) -> Vec<String> {
    let r = t.get("/v1/subjects?filter[module]=null").await;
    assert_eq!(r.body["meta"]["page"]["total"], r.data().len());
    r.ids()
}

on_both!(a_subject_that_loses_its_module_is_then_without_one);
async fn a_subject_that_loses_its_module_is_then_without_one() {
    let t = TestApp::new().await;
    let (m1, m2) = (t.module("M1").await, t.module("M2").await);
    let s1 = t.subject("S1", Some(&m1)).await;
    let s2 = t.subject("S2", Some(&m1)).await;
    let s3 = t.subject("S3", None).await;
    let s4 = t.subject("S4", Some(&m2)).await;
    assert_eq!(without_module(&t).await, vec![s3.clone()]);
    let r = t.write("PATCH", &format!("/v1/subjects/{s1}/relationships/module"), json!({"data": null})).await;
    r.assert_status(200);
    assert_eq!(without_module(&t).await, [s1.clone(), s3.clone()]);
    // Into a module, and out of one by replacing the module's set.
    let r = t.write("PATCH", &format!("/v1/subjects/{s3}/relationships/module"), one("modules", &m2)).await;
    r.assert_status(200);
    assert_eq!(without_module(&t).await, vec![s1.clone()]);
    let r = t.write("PATCH", &format!("/v1/modules/{m2}/relationships/subjects"), json!({"data": []})).await;
    r.assert_status(200);
    assert_eq!(without_module(&t).await, [s1.clone(), s3.clone(), s4.clone()]);
    // Deleting a module leaves its subjects without one.
    t.delete(&format!("/v1/modules/{m1}")).await.assert_status(204);
    assert_eq!(without_module(&t).await, [s1, s2, s3, s4]);
}

on_both!(filter_null_on_a_to_one_combines_with_a_search);
async fn filter_null_on_a_to_one_combines_with_a_search() {
    let t = TestApp::new().await;
    let m = t.module("Physics").await;
    let rels = json!({"module": one("modules", &m)});
    t.create("subjects", json!({"title": "Optics in a module"}), rels.clone()).await;
    let two = t.create("subjects", json!({"title": "Optics two"}), Value::Null).await;
    t.create("subjects", json!({"title": "Lenses", "content": "Not about it."}), Value::Null).await;
    let three = t
        .create(
            "subjects",
            json!({"title": "Waves", "content": "Optics, again.", "available_for_courses": true}),
            Value::Null,
        )
        .await;
    t.create("subjects", json!({"title": "Optics and waves"}), rels).await;
    // Best match first (the title holds the word), then the others.
    let r = t.get("/v1/subjects?filter[search]=optics&filter[module]=null").await;
    assert_eq!(r.ids(), [two.clone(), three.clone()]);
    assert_eq!(r.body["meta"]["page"]["total"], 2);
    assert!(r.data().iter().all(|d| d["meta"]["search"]["excerpt"].as_str().is_some_and(|e| e.contains("<mark>"))));
    let r = t.get("/v1/subjects?filter[search]=opt*&filter[module]=null&sort=-title&page[size]=1&page[number]=2").await;
    assert_eq!(r.ids(), vec![two.clone()]);
    assert_eq!(r.body["meta"]["page"]["total"], 2);
    let r = t.get("/v1/subjects?filter[search]=optics&filter[module]=null&filter[available_for_courses]=true").await;
    assert_eq!(r.ids(), [three]);
    assert_eq!(r.body["meta"]["page"]["total"], 1);
    let r = t.get(&format!("/v1/modules/{m}/subjects?filter[search]=optics&filter[module]=null")).await;
    assert_eq!(r.body["meta"]["page"]["total"], 0);
}

on_both!(deep_pages_of_the_resources_without_a_parent);
/// Past the first pages (where pages step over their offset by the keys alone), the rows
/// without a parent are those of the whole order read in full, in every order.
async fn deep_pages_of_the_resources_without_a_parent() {
    let shape = coursed::dataset::Shape { modules: 3, subjects_per_module: 200, chapters_per_subject: 0, seed: 3 };
    let t = TestApp::generated(shape).await;
    let module = t.get("/v1/modules?page[size]=1").await.ids().remove(0);
    let r = t.write("PATCH", &format!("/v1/modules/{module}/relationships/subjects"), json!({"data": []})).await;
    r.assert_status(200);
    let module = t.get("/v1/modules?page[size]=1&page[number]=2").await.ids().remove(0);
    let r = t.write("PATCH", &format!("/v1/modules/{module}/relationships/subjects"), json!({"data": []})).await;
    r.assert_status(200);
    // (id, title, created_at) of every subject without a module.
    let mut rows: Vec<(String, String, String)> = Vec::new();
    for n in 1..=6 {
        for d in t.get(&format!("/v1/subjects?page[size]=100&page[number]={n}")).await.data() {
            if d["relationships"]["module"]["data"].is_null() {
                let a = &d["attributes"];
                let text = |k: &str| a[k].as_str().unwrap().to_owned();
                rows.push((d["id"].as_str().unwrap().to_owned(), text("title"), text("created_at")));
            }
        }
    }
    assert_eq!(rows.len(), 400);
    type Row = (String, String, String);
    type Order = fn(&Row, &Row) -> std::cmp::Ordering;
    let orders: [(&str, Order); 4] = [
        ("id", |a, b| a.0.cmp(&b.0)),
        ("-title", |a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0))),
        ("created_at,title", |a, b| a.2.cmp(&b.2).then(a.1.cmp(&b.1)).then(a.0.cmp(&b.0))),
        ("-id", |a, b| b.0.cmp(&a.0)),
    ];
    for (sort, cmp) in orders {
        let mut all = rows.clone();
        all.sort_by(cmp);
        let all: Vec<String> = all.into_iter().map(|r| r.0).collect();
        for (size, number) in [(100u64, 3u64), (20, 14), (1, 400), (13, 31), (7, 58)] {
            let path = format!("/v1/subjects?filter[module]=null&sort={sort}&page[size]={size}&page[number]={number}");
            let from = ((number - 1) * size) as usize;
            let expected: Vec<String> = all.iter().skip(from).take(size as usize).cloned().collect();
            let r = t.get(&path).await;
            assert_eq!(r.ids(), expected, "{path}");
            assert_eq!(r.body["meta"]["page"]["total"], 400, "{path}");
        }
    }
}
