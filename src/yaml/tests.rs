use super::*;
use crate::testenv::yaml_bombs::Bomb;
use serde_json::{Value, json};

fn read(text: &str) -> Result<Vec<Value>, YamlError> {
    from_multiple(text, serde_saphyr::Options::default())
}

#[test]
fn text_without_anchors_is_not_scanned() {
    let cost = check_aliases("a: [1, 2]\nb: '*x'\n").expect("no anchors");
    assert_eq!(cost, AliasCost::default());
}

#[test]
fn ordinary_anchors_and_aliases_still_read_as_before() {
    let text = "base: &base {image: quay.io/x, pullPolicy: IfNotPresent}\n\
                a: *base\n\
                b:\n  <<: *base\n  pullPolicy: Always\n\
                list: [&one 1, *one]\n\
                url: https://example.com/?a=1&b=2\n";
    let ours = read(text).expect("accepted");
    let theirs: Vec<Value> = serde_saphyr::from_multiple(text).expect("saphyr");
    assert_eq!(ours, theirs);
    assert_eq!(
        ours[0]["b"],
        json!({"image": "quay.io/x", "pullPolicy": "Always"})
    );
    let cost = check_aliases(text).expect("accepted");
    // &base (5 nodes) retained and expanded twice, &one retained and expanded once
    assert_eq!(cost.added_nodes, 5 * 3 + 2);
}

#[test]
fn expansion_is_counted_without_expanding() {
    let text = "l0: &l0 x\nl1: &l1 [*l0, *l0, *l0]\nl2: &l2 [*l1, *l1, *l1]\n";
    let cost = check_aliases(text).expect("small");
    // sizes: l0 = 1 node, l1 = 4, l2 = 13; retained 1 + 4 + 13, aliases 3·1 + 3·4
    assert_eq!(cost.added_nodes, 18 + 15);
    // the mapping, three keys, x, two sequences
    assert_eq!(cost.written_nodes, 7);
}

#[test]
fn every_bomb_is_refused_by_the_scan_with_a_line() {
    for bomb in Bomb::ALL {
        let text = bomb.csv("x.v1");
        let err = check_aliases(&text).expect_err(&format!("{bomb:?} refused"));
        let msg = err.to_string();
        assert!(
            msg.contains("alias expansion") && msg.contains("line "),
            "{bomb:?}: {msg}"
        );
        assert!(err.line() >= 5, "{bomb:?}: line {}", err.line());
        let e = read(&text).expect_err("refused");
        assert!(matches!(e, YamlError::Alias(_)), "{bomb:?}: {e}");
    }
}

#[test]
fn laughs_are_refused_at_the_first_level_over_budget() {
    let err = check_aliases(&Bomb::Laughs.fragment(0)).expect_err("refused");
    // 9^5 = 59,049 nodes at level 5 (line 1 + 5·10 = 51): the first level past the
    // allowance plus the 2·input bound.
    match err {
        AliasError::Expansion {
            line, added_nodes, ..
        } => {
            assert!(line <= 61, "line {line}");
            assert!(added_nodes < 1_000_000, "{added_nodes}");
        }
        other => panic!("{other}"),
    }
}

#[test]
fn an_alias_may_double_a_document_but_not_more() {
    // 20,000 written scalars; anchoring the list and aliasing it once is fine (the
    // anchor's copy and the alias), four times is not.
    let items = vec!["x"; 20_000].join(", ");
    let once = format!("a: &a [{items}]\nb: *a\n");
    check_aliases(&once).expect("doubling is within the budget");
    let many = format!("a: &a [{items}]\nb: [*a, *a, *a, *a]\n");
    let err = check_aliases(&many).expect_err("refused");
    assert_eq!(err.line(), 2);
}

#[test]
fn too_many_anchors_are_refused() {
    let text: String = (0..MAX_ANCHORS + 1)
        .map(|i| format!("- &a{i} x\n"))
        .collect();
    let err = check_aliases(&text).expect_err("refused");
    assert!(matches!(err, AliasError::TooManyAnchors { .. }), "{err}");
}

#[test]
fn syntax_errors_and_recursion_are_left_to_the_deserializer() {
    let e = read("a: &a [*a]\n").expect_err("recursive alias");
    assert!(matches!(e, YamlError::Parse(_)), "{e}");
    let e = read("a: &a [x\n").expect_err("unterminated");
    assert!(matches!(e, YamlError::Parse(_)), "{e}");
    assert!(e.line().is_some());
}

#[test]
fn the_deserializer_replay_limit_follows_the_budget() {
    let cost = AliasCost {
        written_nodes: 10,
        ..AliasCost::default()
    };
    let o = bounded(serde_saphyr::Options::default(), &cost);
    assert_eq!(
        o.alias_limits.max_total_replayed_events,
        2 * (2 * 10 + ALIAS_NODE_ALLOWANCE as usize) + 1024
    );
}

#[test]
fn continuation_lines_are_indented_past_the_line_above() {
    let text = "a:\n  b: \"one\n two\"\nc: 1\n";
    assert_eq!(
        reindent_line(text, 3).as_deref(),
        Some("a:\n  b: \"one\n   two\"\nc: 1\n")
    );
    assert_eq!(reindent_line(text, 9), None);
    assert_eq!(reindent_line(text, 0), None);
    // Read as Go reads it: the continuation's leading blanks are not part of the value.
    let v: Value = from_str(text, serde_saphyr::Options::default()).expect("read");
    assert_eq!(v["a"]["b"], Value::from("one two"));
    // A document marker inside a quoted scalar stays an error, as in Go.
    let e = from_str::<Value>("a: \"one\n---\ntwo\"\n", serde_saphyr::Options::default())
        .expect_err("a document marker inside a quoted scalar");
    assert_eq!(e.line(), Some(2), "{e}");
}
