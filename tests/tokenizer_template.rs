//! Chat templates: SmolLM2's own template against jinja2's rendering (committed fixture), the
//! Gemma fallback, and hostile templates stopped by the sandbox with the fallback used.

use serde_json::Value;
use strata::paths::{model_path, GEMMA3_ENV, SMOLLM2_ENV};
use strata::tokenizer::template::{Builtin, Limits};
use strata::tokenizer::{ChatMessage, ChatTemplate, Tokenizer};

fn load(env: &str) -> Tokenizer {
    let path = model_path(env).unwrap_or_else(|e| panic!("{e}"));
    Tokenizer::from_gguf_path(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn messages(v: &Value) -> Vec<ChatMessage> {
    v.as_array()
        .expect("messages")
        .iter()
        .map(|m| {
            ChatMessage::new(
                m["role"].as_str().expect("role"),
                m["content"].as_str().expect("content"),
            )
        })
        .collect()
}

#[test]
fn smollm2_template_matches_jinja2() {
    let path = strata::paths::project_root().join("tests/fixtures/tokenizer/reference.json");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let fx: Value = serde_json::from_str(&text).expect("fixture JSON");
    let tok = load(SMOLLM2_ENV);
    let tmpl = ChatTemplate::from_tokenizer(&tok);
    let cases = fx["models"]["smollm2"]["chat"]
        .as_array()
        .expect("chat cases");
    assert!(cases.len() >= 3);
    for case in cases {
        let msgs = messages(&case["messages"]);
        let agp = case["add_generation_prompt"].as_bool().expect("flag");
        let r = tmpl.render(&msgs, agp);
        assert_eq!(r.warning, None);
        assert_eq!(r.template_name, "model");
        assert_eq!(
            r.prompt,
            case["rendered"].as_str().expect("rendered"),
            "messages {msgs:?}"
        );
        assert!(r.stops.iter().any(|s| s == "<|im_end|>"), "{:?}", r.stops);
        assert!(r.stop_ids.contains(&2));
    }
    // The prompt tokenizes with its control tokens recognised (no BOS: SmolLM2 has add_bos false).
    let r = tmpl.render(&[ChatMessage::new("user", "hi")], true);
    let ids = tok.encode_prompt(&r.prompt);
    assert_eq!(
        ids.iter().filter(|&&i| i == 1).count(),
        3,
        "three <|im_start|> in {ids:?}"
    );
}

#[test]
fn gemma_base_has_no_template_and_falls_back_with_warning() {
    let tok = load(GEMMA3_ENV);
    assert!(tok.chat_template().is_none());
    let tmpl = ChatTemplate::from_tokenizer(&tok);
    let msgs = [
        ChatMessage::new("system", "Be brief."),
        ChatMessage::new("user", "Hi"),
        ChatMessage::new("assistant", "Hello."),
        ChatMessage::new("user", "Bye"),
    ];
    let r = tmpl.render(&msgs, true);
    assert_eq!(r.template_name, "gemma");
    assert!(
        r.warning
            .as_deref()
            .unwrap_or("")
            .contains("no chat template"),
        "{:?}",
        r.warning
    );
    assert_eq!(
        r.prompt,
        "<start_of_turn>user\nBe brief.\n\nHi<end_of_turn>\n<start_of_turn>model\nHello.<end_of_turn>\n\
         <start_of_turn>user\nBye<end_of_turn>\n<start_of_turn>model\n"
    );
    assert_eq!(r.stops.first().map(String::as_str), Some("<end_of_turn>"));
    let ids = tok.encode_prompt(&r.prompt);
    let sot = tok.token_id("<start_of_turn>").expect("token");
    assert_eq!(ids[0], 2, "BOS first");
    assert_eq!(ids.iter().filter(|&&i| i == sot).count(), 4);
}

fn hostile(src: &str) -> (Option<String>, String) {
    let t = ChatTemplate::new(Some(src.to_string()), Builtin::ChatMl, "<s>", "</s>");
    let msgs = [ChatMessage::new("user", "hi")];
    let strict = t.render_strict(&msgs, true, Limits::for_messages(&msgs));
    let err = strict.expect_err("hostile template must fail").to_string();
    let r = t.render(&msgs, true);
    assert_eq!(r.template_name, "chatml");
    assert_eq!(
        r.prompt,
        "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"
    );
    (r.warning, err)
}

#[test]
fn infinite_loop_is_stopped_by_fuel() {
    let t0 = std::time::Instant::now();
    let (warning, err) =
        hostile("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}");
    println!("stopped after {:?}: {err}", t0.elapsed());
    assert!(err.contains("instruction budget"), "{err}");
    assert!(warning.unwrap_or_default().contains("instruction budget"));
}

#[test]
fn huge_output_is_capped() {
    let (_, err) = hostile("{% for i in range(100000) %}{{ 'xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx' }}{% endfor %}");
    println!("{err}");
    assert!(
        err.contains("exceeds") || err.contains("instruction budget"),
        "{err}"
    );
    let (_, err) = hostile("{{ 'x' * 1000000000 }}");
    println!("{err}");
    assert!(
        err.contains("exceeds") || err.contains("budget") || err.contains("invalid"),
        "{err}"
    );
}

#[test]
fn attribute_probing_is_rejected() {
    let (warning, err) = hostile("{{ ''.__class__.__mro__[1].__subclasses__() }}");
    assert!(err.contains("__class__"), "{err}");
    assert!(warning.unwrap_or_default().contains("Python internals"));
}

#[test]
fn recursion_and_raise_exception() {
    let (_, err) = hostile("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}");
    println!("{err}");
    assert!(err.contains("recursion") || err.contains("budget"), "{err}");
    let (_, err) = hostile("{{ raise_exception('only user/assistant roles') }}");
    assert!(err.contains("only user/assistant roles"), "{err}");
    let (_, err) = hostile("{% include 'secrets.txt' %}");
    assert!(err.contains("template"), "{err}");
}

#[test]
fn python_methods_and_filters_used_by_hf_templates() {
    let src = "{% for m in messages %}{{ m['role'].upper() }}:{{ m.content.strip() | trim }}|\
               {{ m.content.startswith(('x','  he')) }}|{{ m | tojson }}{% endfor %}{{ strftime_now('%Y') | length }}";
    let t = ChatTemplate::new(Some(src.to_string()), Builtin::ChatMl, "", "");
    let msgs = [ChatMessage::new("user", "  hello ")];
    let out = t
        .render_strict(&msgs, false, Limits::for_messages(&msgs))
        .expect("renders");
    assert!(out.starts_with("USER:hello|True|{"), "{out}");
    assert!(
        out.contains("\"role\":\"user\"") || out.contains("\"role\": \"user\""),
        "{out}"
    );
    assert!(out.ends_with('4'), "{out}");
}
