"""Are a model's free answers about the question? The teacher judges, on held-out questions.

  python train/judge.py QUESTIONS TOKDIR N TEACHER.gguf OUTDIR MODEL.gguf[@T] [MODEL.gguf[@T] ...]
      QUESTIONS: a teacher data file (DATA.u16: its held-out tail's questions, never trained on)
                 or a text file with one question per line (train/chat_prompts.txt)

prompt_gain.py scores the teacher's answers (teacher forcing); this scores what each MODEL
writes itself, the way a chat shows it. For the first N questions, each MODEL answers through
llama.cpp's `llama-completion --jinja -cnv -st`, sampled as in the model card (temp 0.7, top-p
0.9, repeat penalty 1.15, seed 1, 200 tokens; JUDGE_TEMP=T samples at another temperature,
MODEL.gguf@T samples one model at T; JUDGE_SEEDS=1,2,3 answers each question once per seed).
The teacher then scores each answer after its own question and after another of the N
questions (prompt_gain.py's derangement): relevance = NLL_teacher(answer | other) - NLL_teacher(answer | own), nats per
answer token. An answer that ignores its question scores about 0; the teacher's own answers,
through the same path, are the yardstick (pass its GGUF as a MODEL too). The answers are kept in
OUTDIR/<folder>_<file name>[_t<temp>][_s<seed>]/<question digest>.txt and reused when the
script runs again. With several seeds a question's relevance is the mean over its answers, and
each seed's own mean is printed: one seed's draw of a model's answers is noise that every
comparison against that model shares (docs/flash-mini.md, "The same model, rounded again").
Beside it: each model's answer length in tokens, how many answers are under 16 tokens, and the
relevance of the others alone. A piece of the question echoed back and nothing else (what a
model trained on this very measure learned: docs/flash-mini.md, "A reward for using the
question") is nearly free for the teacher after its own question, so it scores 2-5 nats a token
where real answers score 0.1-0.5. Every relevance and pair is also given with the answer tokens
that start one of the question's own words left out (not_echo): the teacher pays for those
whether or not the answer uses the question.
"""
import hashlib
import os
import re
import subprocess
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from prompt_gain import answer_ids, answer_nll, held_conversations, load  # noqa: E402
from train import SHORT  # noqa: E402  (answer tokens: one shorter is counted apart, below)
from train import answer_mask, content_tokens, question_share  # noqa: E402

LLAMA = os.path.join(os.environ.get("STRATA_LLAMA_CPP_DIR",
                                    os.path.expanduser("~/.cache/strata/llama.cpp-11434")), "build", "bin")
# JUDGE_TEMP: another sampling temperature for every model (its answers kept in their own
# folders); MODEL.gguf@T samples that one model at T, so one run pairs a model with itself at
# two temperatures
TEMP = os.environ.get("JUDGE_TEMP", "0.7")
SEEDS = [s.strip() for s in os.environ.get("JUDGE_SEEDS", "1").split(",") if s.strip()]
# Relevance is a mean per answer token and flash-mini's use of the question fades along an
# answer, so a model that answers shorter scores higher without using the question more. Every
# figure is also given over each answer's first FIRST tokens alone (an answer shorter than that
# whole), where models of any answer length are read over the same stretch (docs/flash-mini.md,
# "Stage 11's loss on short, finished answers"). JUDGE_FIRST=K sets it.
FIRST = int(os.environ.get("JUDGE_FIRST", "64"))


def sampling(temp, seed):
    return ["-n", "200", "-c", "1024", "-t", "2", "--temp", temp, "--top-p", "0.9",
            "--repeat-penalty", "1.15", "--seed", seed]


def model_temp(arg):
    """MODEL.gguf or MODEL.gguf@T: the file and its sampling temperature."""
    path, sep, temp = arg.rpartition("@")
    if not sep:
        return arg, TEMP
    try:
        float(temp)
    except ValueError:
        sys.exit(f"{arg}: the part after '@' must be a sampling temperature")
    return path, temp


def label(arg, seed="1"):
    # two stages' files share a name (flash-mini-Q4_K_M.gguf), so the folder names the model too;
    # seed 1 keeps the name it had before there were seeds, so its cached answers still count
    model, temp = model_temp(arg)
    name = f"{os.path.basename(os.path.dirname(os.path.abspath(model)))}_{os.path.basename(model)}"
    name = name if temp == "0.7" else f"{name}_t{temp}"
    return name if seed == "1" else f"{name}_s{seed}"


def answer(arg, question, path, seed):
    model, temp = model_temp(arg)
    if not os.path.exists(path):
        r = subprocess.run([os.path.join(LLAMA, "llama-completion"), "-m", model, "--jinja", "-cnv", "-st",
                            "-p", question, "--no-display-prompt", *sampling(temp, seed)],
                           stdin=subprocess.DEVNULL, capture_output=True, timeout=300)
        if r.returncode != 0:
            err = r.stderr[-500:].decode(errors="replace")
            sys.exit(f"llama-completion on {model} failed ({r.returncode}): {err}")
        with open(path + ".tmp", "w") as f:
            # the token limit can cut a multi-byte character in two
            f.write(r.stdout.decode("utf-8", errors="replace"))
        os.replace(path + ".tmp", path)
    return open(path).read().replace("[end of text]", "").strip()


def words(text):
    """The words of a text, lower case, over 3 letters."""
    return [w for w in re.findall(r"[a-z]+", text.lower()) if len(w) > 3]


def echo_signs(tok, content, question, answer):
    """(train.question_share of the answer after its question in the chat template, the measure
    the reward's guard caps; the share of its word 3-grams that repeat an earlier one): both
    raise the relevance without answering better (a lower temperature raises both;
    docs/flash-mini.md, "A lower temperature does not make it read better")."""
    text = tok.apply_chat_template([{"role": "user", "content": question},
                                    {"role": "assistant", "content": answer}], tokenize=False)
    x = torch.tensor([tok(text, add_special_tokens=False).input_ids])   # (1, n)
    share = question_share(x, answer_mask(x), content).item()
    a = words(answer)
    grams = [tuple(a[i:i + 3]) for i in range(len(a) - 2)]
    seen, again = set(), 0
    for g in grams:
        again += g in seen
        seen.add(g)
    return share, (again / len(grams) if grams else 0.0)


def not_echo(tok, content, question, answer):
    """(answer tokens as answer_nll scores them,) bool: False where the token starts one of the
    question's own words (content_tokens, as question_share counts them). The relevance pays for
    the question's words whether or not the answer uses the question; over the rest it reads
    what the answer says of its own (docs/flash-mini.md, "The reward guarded on the question's
    words")."""
    asked = content.intersection(tok(question, add_special_tokens=False).input_ids)
    return np.array([t not in asked for t in answer_ids(tok, answer)])


def by_seed(xs, fmt=".3f"):
    """'1 x1, 2 x2, ...': one figure per sampling seed."""
    return ", ".join(f"{s} {x:{fmt}}" for s, x in zip(SEEDS, xs))


def paired(name, ds):
    """Print a paired difference, ds (seeds, questions), over questions and, with several seeds,
    by seed; return its per-question mean over seeds."""
    d = ds.mean(0)
    print(f"{name}: {d.mean():+.3f} ± {d.std(ddof=1) / np.sqrt(len(d)):.3f} (paired)")
    if len(SEEDS) > 1:
        # every question is sampled with the same seed, so one seed's draw moves all of a
        # model's answers together: the spread of these is the error to read, not the ± above
        per_seed = ds.mean(1)
        print(f"{name}: by seed {by_seed(per_seed, '+.3f')}"
              f"; mean {per_seed.mean():+.3f} ± {per_seed.std(ddof=1) / np.sqrt(len(per_seed)):.3f}"
              " over seeds (paired)")
    return d


def questions(src, tok, n):
    if src.endswith(".txt"):
        return [s.strip() for s in open(src) if s.strip() and not s.startswith("#")][:n]
    return [q for q, _ in held_conversations(src, tok, n)]


def main():
    data, tok_dir, n, teacher, outdir = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4], sys.argv[5]
    models = sys.argv[6:]
    from transformers import AutoTokenizer
    tok = AutoTokenizer.from_pretrained(tok_dir)
    content = content_tokens(tok)
    qs = questions(data, tok, n)
    wrong = [(i + 1 + i % 7) % len(qs) for i in range(len(qs))]   # never i itself
    answers = {}   # model -> seed -> one answer per question
    for m in models:
        answers[m] = {}
        for seed in SEEDS:
            d = os.path.join(outdir, label(m, seed))
            os.makedirs(d, exist_ok=True)
            answers[m][seed] = [answer(m, q, os.path.join(d, hashlib.sha1(q.encode()).hexdigest()[:16] + ".txt"),
                                       seed) for q in qs]
    judge = load(teacher)
    print(f"{len(qs)} questions from {data}, judged by {os.path.basename(teacher)}, sampling seeds {','.join(SEEDS)}")
    # model -> (seeds, questions) relevance: over whole answers, over their first FIRST tokens and
    # over the answer tokens that do not start one of the question's words; (questions,) shortest answer
    rel, rel_first, rel_rest, size = {}, {}, {}, {}
    for m in models:
        own, gain, first, rest, n = [], [], [], [], []   # each (seeds, questions)
        for seed in SEEDS:
            o_s, g_s, f_s, r_s, n_s = [], [], [], [], []
            for i, a in enumerate(answers[m][seed]):
                if not a:   # an empty answer has nothing to score; it counts as irrelevant
                    o_s.append(np.nan)
                    g_s.append(0.0)
                    f_s.append(0.0)
                    r_s.append(0.0)
                    n_s.append(0)
                    continue
                o = answer_nll(judge, tok, qs[i], a)
                w = answer_nll(judge, tok, qs[wrong[i]], a)
                keep = not_echo(tok, content, qs[i], a)
                o_s.append(o.mean())
                g_s.append((w - o).mean())
                f_s.append((w[:FIRST] - o[:FIRST]).mean())
                r_s.append((w - o)[keep].mean() if keep.any() else 0.0)
                n_s.append(len(o))
            own.append(o_s)
            gain.append(g_s)
            first.append(f_s)
            rest.append(r_s)
            n.append(n_s)
        gain = rel[m] = np.array(gain)
        first = rel_first[m] = np.array(first)
        rest = rel_rest[m] = np.array(rest)
        n = np.array(n)
        g = gain.mean(0)            # a question's relevance: the mean over its answers
        k = size[m] = n.min(0)      # its shortest answer, for the length-matched pairs below
        every = [a for seed in SEEDS for a in answers[m][seed]]
        print(f"{label(m)}: relevance {g.mean():.3f} ± {g.std(ddof=1) / np.sqrt(len(g)):.3f} "
              f"nats/token (median {np.median(g):.3f}, largest {g.max():.2f}: one answer can carry a "
              f"mean), > 0.1 for {(g > 0.1).mean() * 100:.0f}% of the {'questions' if len(SEEDS) > 1 else 'answers'}; teacher NLL of the answers"
              f" {np.nanmean(own):.3f}; {sum(not a for a in every)} empty")
        if len(SEEDS) > 1:
            print(f"{label(m)}: relevance by seed {by_seed(gain.mean(1))}")
        print(f"{label(m)}: relevance over each answer's first {FIRST} tokens {first.mean():.3f}"
              + (f" (by seed {by_seed(first.mean(1))})" if len(SEEDS) > 1 else ""))
        print(f"{label(m)}: relevance without the question's words (the tokens that start one left out) "
              f"{rest.mean():.3f}" + (f" (by seed {by_seed(rest.mean(1))})" if len(SEEDS) > 1 else ""))
        # a per-token mean over a piece of the question echoed back scores far above any real
        # answer: the short ones are counted, and the relevance of the others given apart
        print(f"{label(m)}: answers {n.mean():.0f} tokens on average (median {np.median(n):.0f}), "
              f"{((n > 0) & (n < SHORT)).sum()} under {SHORT}; relevance of the {(k >= SHORT).sum()} "
              f"questions answered at length every time {g[k >= SHORT].mean():.3f}")
        qw, again = np.array([echo_signs(tok, content, qs[i], a) for seed in SEEDS
                              for i, a in enumerate(answers[m][seed])]).mean(0)
        print(f"{label(m)}: the question's words {qw * 100:.1f}% of its word tokens, "
              f"repeated word 3-grams {again * 100:.1f}%")
    # the same questions for every model, so a difference between two models is paired
    for m in models[1:]:
        pair = f"{label(m)} - {label(models[0])}"
        d = paired(pair, rel[m] - rel[models[0]])
        paired(f"{pair}, each answer's first {FIRST} tokens", rel_first[m] - rel_first[models[0]])
        paired(f"{pair}, without the question's words", rel_rest[m] - rel_rest[models[0]])
        both = (size[m] >= SHORT) & (size[models[0]] >= SHORT)
        d = d[both]
        print(f"{pair}, the {both.sum()} questions both answered in {SHORT} "
              f"tokens or more: {d.mean():+.3f} ± {d.std(ddof=1) / np.sqrt(len(d)):.3f} (paired)")


if __name__ == "__main__":
    main()
