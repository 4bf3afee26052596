// dump_logits: llama.cpp as the reference for Strata's engine on a GGUF file.
//
// Evaluates a token sequence (ids from a file, or a prompt tokenized by llama.cpp's own
// tokenizer with the model's BOS rule) in one batch with logits for every position (the prompt
// path), then continues greedily (argmax, lowest id on ties) one token at a time for -n steps
// (the decode path), and writes everything to one file:
//
//   line 1   one JSON object (the header), terminated by '\n'
//   then     rows x n_vocab float32, little-endian, row-major, no padding
//
// Rows 0 .. n_prompt-1: the logits after prompt token r (all from the single prompt batch).
// Rows n_prompt + i:    the logits after feeding greedy[i] alone at position n_prompt + i,
//                       so greedy[i + 1] is the argmax of row n_prompt + i, and greedy[0] the
//                       argmax of row n_prompt - 1.
//
// Header keys: format ("strata-logits-v1"), model (file name), n_vocab, n_prompt, n_gen, rows,
// tokens (the prompt ids), greedy (n_gen ids), prompt (the text, or null with --tokens),
// add_bos, kv_type, flash_attn, n_threads, mean_top1_prob (softmax top-1 probability averaged
// over all rows), dtype ("f32le").
//
// Usage: dump_logits -m MODEL -o OUT (-p TEXT | --tokens FILE) [-n 32] [--kv f16|f32]
//                    [--fa off|on] [-t THREADS] [--no-bos]
//
// --fa on takes llama.cpp's flash-attention path (what llama-completion's default "auto"
// picks on the CPU); the default, off, is its plain graph (`-fa off`).

#include "llama.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

static void usage() {
    fprintf(stderr,
            "usage: dump_logits -m MODEL -o OUT (-p TEXT | --tokens FILE) [-n 32] [--kv f16|f32] "
            "[--fa off|on] [-t THREADS] [--no-bos]\n");
    exit(2);
}

static void die(const char * what) {
    fprintf(stderr, "dump_logits: %s\n", what);
    exit(1);
}

static std::string json_string(const std::string & s) {
    std::string out = "\"";
    for (unsigned char c : s) {
        switch (c) {
            case '"':  out += "\\\""; break;
            case '\\': out += "\\\\"; break;
            case '\n': out += "\\n";  break;
            case '\t': out += "\\t";  break;
            case '\r': out += "\\r";  break;
            default:
                if (c < 0x20) {
                    char buf[8];
                    snprintf(buf, sizeof(buf), "\\u%04x", c);
                    out += buf;
                } else {
                    out += (char) c;
                }
        }
    }
    return out + "\"";
}

static std::string json_ids(const std::vector<llama_token> & ids) {
    std::string out = "[";
    for (size_t i = 0; i < ids.size(); ++i) {
        out += (i ? "," : "") + std::to_string(ids[i]);
    }
    return out + "]";
}

// lowest id on ties, as Strata's greedy sampler
static llama_token argmax(const float * row, int n) {
    int best = 0;
    for (int i = 1; i < n; ++i) {
        if (row[i] > row[best]) {
            best = i;
        }
    }
    return best;
}

static double top1_prob(const float * row, int n) {
    double mx = row[0];
    for (int i = 1; i < n; ++i) {
        mx = std::max(mx, (double) row[i]);
    }
    double sum = 0.0;
    for (int i = 0; i < n; ++i) {
        sum += std::exp((double) row[i] - mx);
    }
    return 1.0 / sum;
}

static void quiet_log(ggml_log_level level, const char * text, void *) {
    if (level == GGML_LOG_LEVEL_ERROR || level == GGML_LOG_LEVEL_WARN) {
        fputs(text, stderr);
    }
}

int main(int argc, char ** argv) {
    std::string model_path, out_path, prompt, tokens_path, kv = "f16", fa = "off";
    bool have_prompt = false, add_bos = true, verbose = false;
    int n_gen = 32, n_threads = 2;
    for (int i = 1; i < argc; ++i) {
        std::string a = argv[i];
        auto next = [&]() -> std::string {
            if (i + 1 >= argc) usage();
            return argv[++i];
        };
        if (a == "-m") model_path = next();
        else if (a == "-o") out_path = next();
        else if (a == "-p") { prompt = next(); have_prompt = true; }
        else if (a == "--tokens") tokens_path = next();
        else if (a == "-n") n_gen = std::atoi(next().c_str());
        else if (a == "-t") n_threads = std::atoi(next().c_str());
        else if (a == "--kv") kv = next();
        else if (a == "--fa") fa = next();
        else if (a == "--no-bos") add_bos = false;
        else if (a == "-v") verbose = true;
        else usage();
    }
    if (model_path.empty() || out_path.empty() || have_prompt == !tokens_path.empty() || n_gen < 0 ||
        n_threads < 1 || (kv != "f16" && kv != "f32") || (fa != "off" && fa != "on")) {
        usage();
    }
    if (!verbose) {
        llama_log_set(quiet_log, nullptr);
    }

    llama_backend_init();
    llama_model_params mp = llama_model_default_params();
    mp.n_gpu_layers = 0;
    llama_model * model = llama_model_load_from_file(model_path.c_str(), mp);
    if (!model) die("cannot load the model (run with -v for llama.cpp's log)");
    const llama_vocab * vocab = llama_model_get_vocab(model);
    const int n_vocab = llama_vocab_n_tokens(vocab);

    std::vector<llama_token> tokens;
    if (have_prompt) {
        int n = -llama_tokenize(vocab, prompt.c_str(), (int32_t) prompt.size(), nullptr, 0, add_bos, false);
        tokens.resize(n);
        if (llama_tokenize(vocab, prompt.c_str(), (int32_t) prompt.size(), tokens.data(), n, add_bos, false) != n) {
            die("tokenization failed");
        }
    } else {
        std::ifstream f(tokens_path);
        if (!f) die("cannot read the tokens file");
        long id;
        while (f >> id) {
            if (id < 0 || id >= n_vocab) die("a token id in the tokens file is out of range");
            tokens.push_back((llama_token) id);
        }
        if (add_bos && (tokens.empty() || tokens[0] != llama_vocab_bos(vocab))) {
            tokens.insert(tokens.begin(), llama_vocab_bos(vocab));
        }
    }
    const int n_prompt = (int) tokens.size();
    if (n_prompt == 0) die("no tokens");

    llama_context_params cp = llama_context_default_params();
    cp.n_ctx = (uint32_t) (n_prompt + n_gen + 16);
    cp.n_batch = cp.n_ubatch = (uint32_t) std::max(n_prompt, 32);
    cp.n_seq_max = 1;
    cp.n_threads = cp.n_threads_batch = n_threads;
    // plain attention by default (the reference the engine's attention kernels are compared
    // with); --fa on for llama.cpp's default path on the CPU
    cp.flash_attn_type = fa == "on" ? LLAMA_FLASH_ATTN_TYPE_ENABLED : LLAMA_FLASH_ATTN_TYPE_DISABLED;
    cp.type_k = cp.type_v = kv == "f16" ? GGML_TYPE_F16 : GGML_TYPE_F32;
    cp.no_perf = true;
    llama_context * ctx = llama_init_from_model(model, cp);
    if (!ctx) die("cannot create the context");

    std::vector<float> rows;
    rows.reserve((size_t) (n_prompt + n_gen) * n_vocab);

    llama_batch batch = llama_batch_init(n_prompt, 0, 1);
    for (int i = 0; i < n_prompt; ++i) {
        batch.token[i] = tokens[i];
        batch.pos[i] = i;
        batch.n_seq_id[i] = 1;
        batch.seq_id[i][0] = 0;
        batch.logits[i] = 1;
    }
    batch.n_tokens = n_prompt;
    if (llama_decode(ctx, batch) != 0) die("llama_decode failed on the prompt");
    for (int i = 0; i < n_prompt; ++i) {
        const float * l = llama_get_logits_ith(ctx, i);
        rows.insert(rows.end(), l, l + n_vocab);
    }
    llama_batch_free(batch);

    std::vector<llama_token> greedy;
    llama_token next = argmax(rows.data() + (size_t) (n_prompt - 1) * n_vocab, n_vocab);
    for (int i = 0; i < n_gen; ++i) {
        greedy.push_back(next);
        llama_batch one = llama_batch_init(1, 0, 1);
        one.token[0] = next;
        one.pos[0] = n_prompt + i;
        one.n_seq_id[0] = 1;
        one.seq_id[0][0] = 0;
        one.logits[0] = 1;
        one.n_tokens = 1;
        if (llama_decode(ctx, one) != 0) die("llama_decode failed on a greedy step");
        llama_batch_free(one);
        const float * l = llama_get_logits_ith(ctx, -1);
        rows.insert(rows.end(), l, l + n_vocab);
        next = argmax(l, n_vocab);
    }

    const int n_rows = n_prompt + n_gen;
    double top1 = 0.0;
    for (int r = 0; r < n_rows; ++r) {
        const float * l = rows.data() + (size_t) r * n_vocab;
        for (int i = 0; i < n_vocab; ++i) {
            if (!std::isfinite(l[i])) die("llama.cpp produced a non-finite logit");
        }
        top1 += top1_prob(l, n_vocab);
    }
    top1 /= n_rows;

    std::string name = model_path.substr(model_path.find_last_of('/') == std::string::npos ? 0 : model_path.find_last_of('/') + 1);
    char top1_buf[32];
    snprintf(top1_buf, sizeof(top1_buf), "%.6f", top1);
    std::ostringstream h;
    h << "{\"format\":\"strata-logits-v1\",\"model\":" << json_string(name)
      << ",\"n_vocab\":" << n_vocab << ",\"n_prompt\":" << n_prompt << ",\"n_gen\":" << n_gen
      << ",\"rows\":" << n_rows << ",\"tokens\":" << json_ids(tokens) << ",\"greedy\":" << json_ids(greedy)
      << ",\"prompt\":" << (have_prompt ? json_string(prompt) : std::string("null"))
      << ",\"add_bos\":" << (add_bos ? "true" : "false") << ",\"kv_type\":\"" << kv << "\""
      << ",\"flash_attn\":" << (fa == "on" ? "true" : "false") << ",\"n_threads\":" << n_threads << ",\"mean_top1_prob\":" << top1_buf
      << ",\"dtype\":\"f32le\"}\n";

    FILE * out = fopen(out_path.c_str(), "wb");
    if (!out) die("cannot create the output file");
    const std::string hs = h.str();
    // the host is little-endian (x86-64), so the floats go out as they are in memory
    if (fwrite(hs.data(), 1, hs.size(), out) != hs.size() ||
        fwrite(rows.data(), sizeof(float), rows.size(), out) != rows.size() || fclose(out) != 0) {
        die("writing the output file failed");
    }
    printf("%s: %d prompt + %d greedy rows x %d, mean top-1 prob %.4f\n", out_path.c_str(), n_prompt, n_gen,
           n_vocab, top1);

    llama_free(ctx);
    llama_model_free(model);
    llama_backend_free();
    return 0;
}
