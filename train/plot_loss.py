"""flash-mini's loss curves from the training histories that train.py writes.

  python train/plot_loss.py docs/flash-mini/hist docs/flash-mini/loss.png

Left: the trunk over all the tokens it has seen, stage by stage (each stage's history counts
its tokens from zero, so they are laid end to end; stages 8 and 9 both start from stage 7,
stage 10, the grown 12-layer trunk and the 8x32h8 one from stage 9, answer-only from the grown one, own answers from the 8x32h8 one, the runs from stage 11 on the fresh chat9 (the reward, at top 8 too, on its short answers alone and with the question-word guard; its own answers alone; widened to 512); stage 7's windows start at conversation starts, its held-out CE too, so
it reads lower than stage 6's on the same weights). Middle: the MTP block's CE per depth (stages 3-4, trained on
the teacher's text). Right: stages 5-10 and the grown trunk's, trained on the trunk's own distribution: held-out
top-1 agreement with the trunk and the mean run of agreeing chained drafts (train.py's
stand-in for accepted drafts per verify window).
"""
import json
import os
import sys


def load(d, name):
    p = os.path.join(d, name)
    return json.load(open(p)) if os.path.exists(p) else []


def main():
    d, out = sys.argv[1:3]
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, (a, b, c) = plt.subplots(1, 3, figsize=(15, 4.2))
    off = 0.0
    for name, label in [("trunk_stage2-3.json", "stages 2-3"), ("trunk_stage4.json", "stage 4"),
                        ("trunk_stage6.json", "stage 6"), ("trunk_stage7.json", "stage 7 (aligned)"),
                        ("trunk_stage8.json", "stage 8 (not shipped)"),
                        ("trunk_stage9.json", "stage 9 (shipped until stage 11)"),
                        ("trunk_stage10.json", "stage 10 (not shipped)"),
                        ("trunk_grow.json", "grown 12x20 (not shipped)"),
                        ("trunk_answer.json", "grown, answer-only (not shipped)"),
                        ("trunk_wide.json", "8x32h8 (not shipped)"),
                        ("trunk_onpol.json", "8x32h8, own answers (not shipped)"),
                        ("trunk_reward.json", "8x32h8, relevance reward (not shipped)"),
                        ("trunk_guard.json", "stage 11: the reward guarded (shipped)"),
                        ("trunk_reward11.json", "stage 11 + reward, KL x2 (not shipped)"),
                        ("trunk_reward11k1.json", "stage 11 + reward, KL x1 (not shipped)"),
                        ("trunk_reward11lr.json", "stage 11 + reward, lr 5e-5 (not shipped)"),
                        ("trunk_top8.json", "stage 11 + reward, top 8 (not shipped)"),
                        ("trunk_brief.json", "stage 11 + reward, short9 (not shipped)"),
                        ("trunk_qwords.json", "stage 11 + reward, question-word guard (not shipped)"),
                        ("trunk_opcache.json", "own answers only (not shipped)"),
                        ("trunk_w512.json", "width 512 (not shipped)")]:
        h = load(d, name)
        if not h:
            continue
        x = [off + r["tokens"] / 1e6 for r in h]
        a.plot(x, [r["ce"] for r in h], color="C0", lw=1)
        a.plot(x, [r["held_ce"] for r in h], color="C1", lw=1)
        a.plot(x, [r["kl"] for r in h], color="C2", lw=1)
        a.axvline(off, color="grey", lw=0.6, ls=":")
        a.text(off + 1, 2.2, label, fontsize=6, rotation=90, va="bottom")   # long labels stay under the title
        off = x[-1]
    a.plot([], [], color="C0", label="train CE")
    a.plot([], [], color="C1", label="held-out CE (last 1% of each file)")
    a.plot([], [], color="C2", label="KL(teacher || student)")
    a.set(xlabel="tokens seen (M)", ylabel="nats/token", ylim=(0, 7), title="trunk (batch 64 x 512; from grown 12x20 on: 48; width 512: 32)")
    a.legend(fontsize=6, loc="upper center", ncol=3)   # one row above the stage labels, which end below 6

    s0 = 0
    for name, ls in [("mtp_stage3.json", "-"), ("mtp_stage4.json", "--")]:
        h = load(d, name)
        for k in range(3):
            b.plot([s0 + r["step"] for r in h], [r["per_depth"][k] for r in h], ls=ls, color=f"C{k}",
                   label=f"depth {k + 1} ({name[4:10].replace('_', ' ')})")
        s0 += h[-1]["step"] if h else 0
    b.set(xlabel="MTP step (batch 32 x 512)", ylabel="CE nats/token", ylim=(1, 7),
          title="MTP block, teacher's text (stages 3-4)")
    b.legend(fontsize=7)

    for name, col in [("mtp_stage5.json", "C3"), ("mtp_stage6.json", "C4"), ("mtp_stage7.json", "C5"),
                      ("mtp_stage8.json", "C6"), ("mtp_stage9.json", "C7"), ("mtp_stage10.json", "C8"),
                      ("mtp_grow.json", "C9"), ("mtp_answer.json", "C0"),
                      ("mtp_onpol.json", "C1"), ("mtp_reward.json", "C2"), ("mtp_guard.json", "k"),
                      ("mtp_reward11.json", "grey"), ("mtp_reward11k1.json", "olive"),
                      ("mtp_reward11lr.json", "teal"), ("mtp_top8.json", "navy"),
                      ("mtp_brief.json", "maroon"), ("mtp_qwords.json", "purple"),
                      ("mtp_opcache.json", "orange"), ("mtp_w512.json", "lime")]:
        h = load(d, name)
        st = name[4:-5].replace("_", " ")
        c.plot([r["step"] for r in h], [r["held_accepted"] for r in h], color=col, label=f"{st}: agreeing run")
        c.plot([r["step"] for r in h], [sum(r["held_top1"]) / 3 for r in h], color=col, ls="--",
               label=f"{st}: top-1 = trunk's (mean of 3 depths)")
    c.set(xlabel="MTP step (batch 32 x 512)", ylim=(0, 3.6),
          title="MTP block vs the trunk's own argmax (held out)")
    c.legend(fontsize=5, loc="upper right", ncol=2)   # 32 entries: two columns above the curves keep them in the panel
    fig.tight_layout()
    fig.savefig(out, dpi=90)
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
