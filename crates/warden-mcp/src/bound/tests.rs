//! The answer bound on answers built by hand (the transport tests are in
//! tests/it/answers.rs).

use super::*;
use rmcp::model::CallToolResult;
use serde_json::json;

fn whole() -> Result<Whole, GuardError> {
    Ok(Whole {
        task_id: "task_0123456789abcdef0123456789abcdef".into(),
        filename: "value.json".into(),
    })
}

fn metrics(n: usize) -> Value {
    let map: Map<String, Value> = (0..n)
        .map(|i| (format!("metric_{i:05}"), json!(i as f64 * 1.5)))
        .collect();
    json!({"status": "success", "summary": "many metrics", "metrics": map})
}

#[test]
fn a_large_built_in_answer_is_cut_marked_and_points_at_the_whole() {
    // 6,000 metrics into 20 KB: under the bound, truncated with totals, a link, a summary text.
    let limit = 20_000;
    let answer = Answer::plain(CallToolResult::structured(metrics(6_000)));
    let full = size(&answer.result);
    let out = apply(answer, limit, whole());
    assert!(size(&out) <= limit - ANSWER_ENVELOPE_BYTES, "{}", size(&out));
    let value = out.structured_content.clone().expect("structured");
    assert_eq!(value[TRUNCATED_KEY], true);
    let marker = &value[TRUNCATION_KEY];
    assert_eq!(marker["answer_bytes"], full);
    assert_eq!(marker["cut"][0]["at"], "/metrics");
    assert_eq!(marker["cut"][0]["total"], 6_000);
    assert_eq!(marker["whole"]["filename"], "value.json");
    assert_eq!(value["status"], "success");
    let text = out.content[0].as_text().expect("a text summary").text.clone();
    let summary: Value = serde_json::from_str(&text).expect("the summary is JSON");
    assert_eq!(summary[TRUNCATED_KEY], true);
    assert!(summary["text_note"].is_string());
    assert!(out.content.iter().any(|b| b.as_resource_link().is_some()));
}

#[test]
fn a_guard_value_is_never_cut_it_goes_whole_or_as_an_error() {
    // Whole with a summary text when it fits once; else an error naming answer_too_large.
    let value = json!({"rows": (0..2_000).map(|i| json!({"i": i})).collect::<Vec<_>>()});
    let mut answer = Answer::plain(CallToolResult::structured(value.clone()));
    answer.fixed_schema = true;
    let once = size(&value);
    let out = apply(answer, once * 3 / 2 + ANSWER_ENVELOPE_BYTES + 4_000, whole());
    assert_eq!(out.structured_content.as_ref(), Some(&value));
    assert_ne!(out.is_error, Some(true));

    let mut answer = Answer::plain(CallToolResult::structured(value));
    answer.fixed_schema = true;
    let out = apply(answer, 10_000, whole());
    assert!(size(&out) <= 10_000 - ANSWER_ENVELOPE_BYTES);
    assert_eq!(out.is_error, Some(true));
    assert!(out.structured_content.is_none());
    let text: Value = serde_json::from_str(&out.content[0].as_text().unwrap().text).unwrap();
    assert_eq!(text["error"]["code"], "answer_too_large");
    assert_eq!(text["status"], "success");
    assert_eq!(text[TRUNCATED_KEY], true);
    assert_eq!(text[TRUNCATION_KEY]["cut"][0]["at"], "/output/rows");
}

#[test]
fn content_blocks_keep_their_head_and_end_with_a_marker() {
    let blocks = vec![
        ContentBlock::text("a".repeat(50_000)),
        ContentBlock::text("b".repeat(50_000)),
    ];
    let out = apply(Answer::plain(CallToolResult::success(blocks)), 20_000, whole());
    assert!(size(&out) <= 20_000 - ANSWER_ENVELOPE_BYTES);
    let texts: Vec<&str> = out
        .content
        .iter()
        .filter_map(|b| b.as_text())
        .map(|t| t.text.as_str())
        .collect();
    assert!(texts[0].starts_with("aaa"));
    let marker: Value = serde_json::from_str(texts.last().unwrap()).unwrap();
    assert_eq!(
        marker[TRUNCATION_KEY]["cut"][0],
        json!({"at": "content", "kept": 1, "total": 2, "unit": "items"})
    );
}

#[test]
fn a_typed_cut_marks_an_answer_that_fits_and_the_text_still_mirrors_it() {
    let mut answer = Answer::plain(CallToolResult::structured(json!({"receipt": {"artifacts": []}})));
    answer.cuts = vec![Cut::items("/receipt/artifacts", 100, 1_000)];
    answer.whole = Some(Whole::result_of("task_0123456789abcdef0123456789abcdef"));
    let out = bounded_kept(answer, DEFAULT_LIMIT);
    let value = out.structured_content.clone().unwrap();
    assert_eq!(value[TRUNCATION_KEY]["cut"][0]["total"], 1_000);
    assert_eq!(value[TRUNCATION_KEY]["whole"]["filename"], "result.json");
    assert_eq!(out.content[0].as_text().unwrap().text, value.to_string());
}

#[test]
fn an_answer_within_the_bound_is_unchanged() {
    let result = CallToolResult::structured(json!({"a": 1}));
    assert_eq!(bounded_kept(Answer::plain(result.clone()), DEFAULT_LIMIT), result);
}

const DEFAULT_LIMIT: usize = crate::limits::DEFAULT_MAX_ANSWER_BYTES;
