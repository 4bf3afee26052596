// Issue 28: what llama.cpp 11434's repacked Q4_K path (CPU_REPACK buffer, q4_K_8x8_q8_K) rounds
// differently from its non-repacked ones, on one Q4_K x f32 product (see docs/kld.md,
// "llama.cpp's repacked Q4_K path").
//
// One Q4_K weight (n_out x n_in, from random f32 by ggml_quantize_chunk) times f32 activations
// (batch rows of n_in) through ggml_mul_mat on the CPU backend twice: the weight in the
// "CPU_REPACK" extra buffer type (what llama.cpp does by default) and in the plain CPU buffer
// (what `-nr` does), plus ggml_vec_dot_q4_K_q8_K called directly. Each is compared with
//   - an f64 reference of the same quantized product: weights dequantized from the Q4_K fields
//     in f64 (d*sc*q - dmin*m), activations rounded to Q8_K by quantize_row_q8_K (the
//     non-repacked path's rounding) and dequantized in f64;
//   - a scalar C emulation of each kernel's arithmetic: exact integer dot products per
//     32-element sub-block, then the kernel's own f32 operations in its own order (gemm: fmaf
//     per 64 elements, two accumulators; gemv: per 256; tiled: per 256 with the min folded in
//     before the activation scale; vec_dot: 8 + 4 lanes, hsum). A bitwise match of every output
//     shows there is no other rounding (no int16 saturation, no f16 intermediate, no dropped term).
// It also checks the repacked path's activation rounding (ggml_quantize_mat_q8_K_4x8, four rows
// interleaved) against quantize_row_q8_K row by row: d, every code, every 16-code sum.
// Last, Q6_K (never repacked on x86): the plain path (tiled or vec_dot) against f64 and vec_dot.
//
// Which kernels run: repacked, batch B: rows 0 .. B-B%4 through ggml_gemm_q4_K_8x8_q8_K, the last
// B%4 through ggml_gemv_q4_K_8x8_q8_K. Plain: B >= 8 through the tiled K-quant matmul
// (ggml-cpu/tiled/, on unless GGML_CPU_TILED_MM=0), else ggml_vec_dot_q4_K_q8_K.
//
/* Build (llama.cpp from scripts/llama-cpp/build.sh; static libs, AVX2 build):
     L=~/.cache/strata/llama.cpp-11434; B=$L/build/llama.cpp/ggml/src
     nice g++ -O2 -mavx2 -mfma -ffp-contract=off -std=c++17 -I$L/src/ggml/include \
         scripts/llama-cpp/repack_probe.cpp $B/libggml.a $B/libggml-cpu.a $B/libggml-base.a \
         -fopenmp -lpthread -lm -ldl -o /tmp/repack_probe
     nice /tmp/repack_probe            # and GGML_CPU_TILED_MM=0 nice /tmp/repack_probe
   -ffp-contract=off: the emulations' fmaf are the kernels' FMAs; no other product may fuse. */
#include "ggml.h"
#include "ggml-alloc.h"
#include "ggml-backend.h"
#include "ggml-cpu.h"

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

// ggml-cpu internals (C linkage, exported by libggml-cpu.a): the non-repacked path's activation
// rounding and dot product, and the repacked path's 4-row activation rounding.
extern "C" {
void quantize_row_q8_K(const float * x, void * y, int64_t k);
void ggml_vec_dot_q4_K_q8_K(int n, float * s, size_t bs, const void * vx, size_t bx, const void * vy, size_t by, int nrc);
void ggml_quantize_mat_q8_K_4x8(const float * x, void * vy, int64_t k);
void ggml_vec_dot_q6_K_q8_K(int n, float * s, size_t bs, const void * vx, size_t bx, const void * vy, size_t by, int nrc);
}

// Layouts of ggml-common.h / ggml-cpu/repack.h (QK_K = 256).
struct block_q4_K {
    uint16_t d;           // f16 super-block scale
    uint16_t dmin;        // f16 super-block min scale
    uint8_t  scales[12];  // 8 scales + 8 mins, 6 bits each
    uint8_t  qs[128];     // 256 nibbles: byte 32j+l holds elements 64j+l (low) and 64j+32+l (high)
};
struct block_q8_K {
    float   d;            // f32 scale
    int8_t  qs[256];
    int16_t bsums[16];    // sums of 16 codes
};
struct block_q8_Kx4 {
    float   d[4];
    int8_t  qs[1024];     // 8 codes of row 0, 8 of row 1, .. row 3, then the next 8 of each
    int16_t bsums[64];    // [16g + 4r + h]: row r, elements 64g+16h .. +16
};
static_assert(sizeof(block_q4_K) == 144, "block_q4_K");
static_assert(sizeof(block_q8_K) == 292, "block_q8_K");
static_assert(sizeof(block_q8_Kx4) == 16 + 1024 + 128, "block_q8_Kx4");

typedef ggml_backend_buffer_type_t * (*get_extra_bufts_t)(ggml_backend_dev_t);

// 6-bit scale and min of sub-block j (ggml-quants.c get_scale_min_k4).
static void scale_min(int j, const uint8_t * q, int & sc, int & m) {
    if (j < 4) {
        sc = q[j] & 63;
        m  = q[j + 4] & 63;
    } else {
        sc = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4);
        m  = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
    }
}

static int nib(const block_q4_K & b, int e) { // code of element e (0..255)
    const int j = e / 64, l = e % 64;
    return l < 32 ? (b.qs[32 * j + l] & 0xF) : (b.qs[32 * j + l - 32] >> 4);
}

// Exact integer parts of one (weight row, activation row) super-block pair:
// dot[s] = sum over sub-block s (32 elements) of q4*q8, bsum[s] = sum of its q8 codes.
struct blk_ints {
    int32_t dot[8], bsum[8], sc[8], m[8];
};
static blk_ints ints(const block_q4_K & w, const block_q8_K & a) {
    blk_ints r;
    for (int s = 0; s < 8; s++) {
        scale_min(s, w.scales, r.sc[s], r.m[s]);
        r.dot[s] = 0;
        for (int e = 32 * s; e < 32 * s + 32; e++) r.dot[s] += nib(w, e) * a.qs[e];
        r.bsum[s] = a.bsums[2 * s] + a.bsums[2 * s + 1];
    }
    return r;
}

// The whole super-block's integer sums: S = sum_s sc*dot (scales), M = sum_s m*bsum (mins).
struct blk_sums {
    int32_t S, M;
};
static blk_sums sums(const blk_ints & t) {
    blk_sums r = { 0, 0 };
    for (int s = 0; s < 8; s++) {
        r.S += t.sc[s] * t.dot[s];
        r.M += t.m[s] * t.bsum[s];
    }
    return r;
}

// ggml_gemm_q4_K_8x8_q8_K (AVX2): per 64 elements (sub-blocks 2sb, 2sb+1) one FMA into each of
// two f32 accumulators, scale products f32(d_w * d_a) and f32(dmin_w * d_a); result acc - acc_min.
static float emu_gemm(const block_q4_K * w, const block_q8_K * a, int nb) {
    float acc = 0.f, acc_min = 0.f;
    for (int b = 0; b < nb; b++) {
        const blk_ints t = ints(w[b], a[b]);
        const float dd = ggml_fp16_to_fp32(w[b].d) * a[b].d;
        const float dm = ggml_fp16_to_fp32(w[b].dmin) * a[b].d;
        for (int sb = 0; sb < 4; sb++) {
            const int32_t S = t.sc[2 * sb] * t.dot[2 * sb] + t.sc[2 * sb + 1] * t.dot[2 * sb + 1];
            const int32_t M = t.m[2 * sb] * t.bsum[2 * sb] + t.m[2 * sb + 1] * t.bsum[2 * sb + 1];
            acc     = fmaf((float) S, dd, acc);
            acc_min = fmaf((float) M, dm, acc_min);
        }
    }
    return acc - acc_min;
}

// ggml_gemv_q4_K_8x8_q8_K (AVX2): the same two accumulators, one FMA per 256 elements.
static float emu_gemv(const block_q4_K * w, const block_q8_K * a, int nb) {
    float acc = 0.f, acc_min = 0.f;
    for (int b = 0; b < nb; b++) {
        const blk_sums t = sums(ints(w[b], a[b]));
        acc     = fmaf((float) t.S, ggml_fp16_to_fp32(w[b].d) * a[b].d, acc);
        acc_min = fmaf((float) t.M, ggml_fp16_to_fp32(w[b].dmin) * a[b].d, acc_min);
    }
    return acc - acc_min;
}

// tiled_run_microtile_avx2<32, true, 0, 1, false>: per 256 elements r = d_w*S - dmin_w*M (one
// product, one fused negative multiply-add), then one FMA r*d_a into the output.
static float emu_tiled(const block_q4_K * w, const block_q8_K * a, int nb) {
    float buf = 0.f;
    for (int b = 0; b < nb; b++) {
        const blk_sums t = sums(ints(w[b], a[b]));
        float r = ggml_fp16_to_fp32(w[b].d) * (float) t.S;
        r       = fmaf(-ggml_fp16_to_fp32(w[b].dmin), (float) t.M, r);
        buf     = fmaf(r, a[b].d, buf);
    }
    return buf;
}

// ggml_vec_dot_q4_K_q8_K (x86 AVX2): 8 int32 lanes (lane k: elements 4k..4k+3 of every
// sub-block, scaled), each FMA'd with f32(d_a*d_w) per 256; 4 min lanes (sub-block pairs) with
// f32(-d_a*dmin_w); hsum_float_8 of the first plus the pairwise sum of the second.
static float emu_vecdot(const block_q4_K * w, const block_q8_K * a, int nb) {
    float acc[8] = {0}, accm[4] = {0};
    for (int b = 0; b < nb; b++) {
        const blk_ints t = ints(w[b], a[b]);
        const float d    = a[b].d * ggml_fp16_to_fp32(w[b].d);
        const float dmin = -a[b].d * ggml_fp16_to_fp32(w[b].dmin);
        for (int k = 0; k < 8; k++) {
            int32_t lane = 0;
            for (int s = 0; s < 8; s++) {
                int32_t p = 0;
                for (int e = 32 * s + 4 * k; e < 32 * s + 4 * k + 4; e++) p += nib(w[b], e) * a[b].qs[e];
                lane += t.sc[s] * p;
            }
            acc[k] = fmaf(d, (float) lane, acc[k]);
        }
        for (int l = 0; l < 4; l++) {
            const int32_t prod = t.m[2 * l] * t.bsum[2 * l] + t.m[2 * l + 1] * t.bsum[2 * l + 1];
            accm[l] = fmaf(dmin, (float) prod, accm[l]);
        }
    }
    float r[4];
    for (int i = 0; i < 4; i++) r[i] = acc[4 + i] + acc[i];
    const float h  = (r[0] + r[2]) + (r[1] + r[3]);
    const float hm = (accm[0] + accm[2]) + (accm[1] + accm[3]);
    return h + hm;
}

// f64 reference of the quantized product.
static double ref64(const block_q4_K * w, const block_q8_K * a, int nb) {
    double y = 0;
    for (int b = 0; b < nb; b++) {
        const double d = ggml_fp16_to_fp32(w[b].d), dmin = ggml_fp16_to_fp32(w[b].dmin);
        for (int s = 0; s < 8; s++) {
            int sc, m;
            scale_min(s, w[b].scales, sc, m);
            for (int e = 32 * s; e < 32 * s + 32; e++) {
                y += (d * sc * nib(w[b], e) - dmin * m) * ((double) a[b].d * a[b].qs[e]);
            }
        }
    }
    return y;
}

// ggml_mul_mat(W, X) on the CPU backend, W's bytes in buffer type `buft`; returns (batch, n_out).
static std::vector<float> run_ggml(ggml_backend_t be, ggml_backend_buffer_type_t buft, const std::vector<uint8_t> & wq,
                                   int n_out, int n_in, const std::vector<float> & x, int batch,
                                   ggml_type wtype = GGML_TYPE_Q4_K) {
    ggml_init_params pw = { ggml_tensor_overhead() * 2, nullptr, true };
    ggml_context * cw = ggml_init(pw);
    ggml_tensor * W = ggml_new_tensor_2d(cw, wtype, n_in, n_out);  // (n_out, n_in)
    ggml_backend_buffer_t bw = ggml_backend_alloc_ctx_tensors_from_buft(cw, buft);
    ggml_backend_tensor_set(W, wq.data(), 0, wq.size());  // the repack buffer repacks here

    ggml_init_params px = { ggml_tensor_overhead() * 4 + ggml_graph_overhead(), nullptr, true };
    ggml_context * cx = ggml_init(px);
    ggml_tensor * X = ggml_new_tensor_2d(cx, GGML_TYPE_F32, n_in, batch);   // (batch, n_in)
    ggml_tensor * Y = ggml_mul_mat(cx, W, X);                                // (batch, n_out)
    ggml_cgraph * gf = ggml_new_graph(cx);
    ggml_build_forward_expand(gf, Y);
    ggml_backend_buffer_t bx = ggml_backend_alloc_ctx_tensors_from_buft(cx, ggml_backend_cpu_buffer_type());
    ggml_backend_tensor_set(X, x.data(), 0, x.size() * sizeof(float));
    if (ggml_backend_graph_compute(be, gf) != GGML_STATUS_SUCCESS) {
        fprintf(stderr, "graph compute failed\n");
        exit(1);
    }
    std::vector<float> y((size_t) batch * n_out);
    ggml_backend_tensor_get(Y, y.data(), 0, y.size() * sizeof(float));
    ggml_backend_buffer_free(bx);
    ggml_backend_buffer_free(bw);
    ggml_free(cx);
    ggml_free(cw);
    return y;
}

struct stat {
    double max_rel = 0, sum_rel = 0, max_nrm = 0, sum_nrm = 0;
    long n = 0, bitwise = 0;
};
// rel: |y - ref| / |ref|; nrm: |y - ref| / rms(ref) (the output's scale, robust to ref ~ 0).
static void add(stat & st, float y, double ref, double rms, float emu) {
    const double e = fabs((double) y - ref);
    const double rel = e / fmax(fabs(ref), 1e-30);
    st.max_rel = fmax(st.max_rel, rel);
    st.sum_rel += rel;
    st.max_nrm = fmax(st.max_nrm, e / rms);
    st.sum_nrm += e / rms;
    st.n++;
    st.bitwise += (memcmp(&y, &emu, sizeof(float)) == 0);
}

int main() {
    // keep ggml's warnings and errors, drop its per-tensor "repack: ..." debug lines
    ggml_log_set([](ggml_log_level level, const char * text, void *) {
        if (level >= GGML_LOG_LEVEL_WARN) fputs(text, stderr);
    }, nullptr);
    ggml_backend_t be = ggml_backend_cpu_init();
    ggml_backend_cpu_set_n_threads(be, 1);
    ggml_backend_dev_t dev = ggml_backend_dev_by_type(GGML_BACKEND_DEVICE_TYPE_CPU);
    ggml_backend_reg_t reg = ggml_backend_dev_backend_reg(dev);
    auto get_extra = (get_extra_bufts_t) ggml_backend_reg_get_proc_address(reg, "ggml_backend_dev_get_extra_bufts");
    ggml_backend_buffer_type_t repack = nullptr;
    for (ggml_backend_buffer_type_t * p = get_extra ? get_extra(dev) : nullptr; p && *p; p++) {
        if (std::string(ggml_backend_buft_name(*p)) == "CPU_REPACK") repack = *p;
    }
    if (!repack) {
        fprintf(stderr, "no CPU_REPACK buffer type in this build\n");
        return 1;
    }
    const char * tm = getenv("GGML_CPU_TILED_MM");
    const bool tiled_on = !(tm && atoi(tm) == 0);
    printf("llama.cpp 11434 CPU (%s), CPU_REPACK found; GGML_CPU_TILED_MM=%s\n",
           ggml_cpu_has_avx512() ? "AVX-512" : "AVX2", tm ? tm : "(unset: tiled on)");

    const int n_out = 640;  // Gemma 3 270M: attn_output (640 x 1024), ffn_down (640 x 2048)
    const int n_ins[] = { 1024, 2048 };
    const int batches[] = { 1, 4, 7, 8, 64 };
    const char * dists[] = { "gauss", "outliers", "extreme" };
    std::mt19937 rng(28);
    std::normal_distribution<float> nd(0.f, 1.f);

    for (const char * dist : dists) {
        for (int n_in : n_ins) {
            const int nb = n_in / 256;
            // weights: N(0, 0.02) plus a per-row offset, so the min term is not small
            std::vector<float> wf((size_t) n_out * n_in);
            for (int o = 0; o < n_out; o++) {
                const float off = 0.01f * nd(rng);
                for (int i = 0; i < n_in; i++) wf[(size_t) o * n_in + i] = off + 0.02f * nd(rng);
            }
            std::vector<uint8_t> wq((size_t) n_out * nb * sizeof(block_q4_K));
            ggml_quantize_chunk(GGML_TYPE_Q4_K, wf.data(), wq.data(), 0, n_out, n_in, nullptr);
            block_q4_K * wb = (block_q4_K *) wq.data();
            if (!strcmp(dist, "extreme")) {
                // largest integer sums the kernels can meet: every code 15, every scale 63, no min
                // (int16 partial sums of 16 products: 16*15*127 = 30480, the closest to 32767)
                for (size_t b = 0; b < (size_t) n_out * nb; b++) {
                    memset(wb[b].qs, 0xFF, sizeof(wb[b].qs));
                    memset(wb[b].scales, 0xFF, sizeof(wb[b].scales));
                    wb[b].dmin = 0;
                }
            }
            for (int batch : batches) {
                // activations: N(0,1); "outliers": 1 % of the channels x 30 (Gemma-like residual rows)
                std::vector<float> x((size_t) batch * n_in);
                for (int t = 0; t < batch; t++) {
                    for (int i = 0; i < n_in; i++) {
                        float v = nd(rng);
                        if (!strcmp(dist, "outliers") && i % 97 == 13) v *= 30.f;
                        if (!strcmp(dist, "extreme")) v = 1.f + 0.001f * fabsf(v);
                        x[(size_t) t * n_in + i] = v;
                    }
                }
                // the non-repacked rounding of the activations, row by row
                std::vector<block_q8_K> aq((size_t) batch * nb);
                for (int t = 0; t < batch; t++) quantize_row_q8_K(&x[(size_t) t * n_in], &aq[(size_t) t * nb], n_in);
                // the repacked rounding (4 rows at a time) against it
                long act_diff = 0;
                for (int t0 = 0; t0 + 4 <= batch; t0 += 4) {
                    std::vector<block_q8_Kx4> a4(nb);
                    ggml_quantize_mat_q8_K_4x8(&x[(size_t) t0 * n_in], a4.data(), n_in);
                    for (int b = 0; b < nb; b++) {
                        for (int r = 0; r < 4; r++) {
                            const block_q8_K & ar = aq[(size_t) (t0 + r) * nb + b];
                            act_diff += memcmp(&a4[b].d[r], &ar.d, 4) != 0;
                            for (int e = 0; e < 256; e++) act_diff += a4[b].qs[(e / 8) * 32 + r * 8 + e % 8] != ar.qs[e];
                            for (int g = 0; g < 4; g++) {
                                for (int h = 0; h < 4; h++) act_diff += a4[b].bsums[16 * g + 4 * r + h] != ar.bsums[4 * g + h];
                            }
                        }
                    }
                }

                const std::vector<float> y_rep = run_ggml(be, repack, wq, n_out, n_in, x, batch);
                const std::vector<float> y_pln = run_ggml(be, ggml_backend_cpu_buffer_type(), wq, n_out, n_in, x, batch);
                const bool pln_tiled = tiled_on && batch >= 8;

                stat s_rep, s_pln, s_vd, s_rp;  // vs ref (bitwise vs own emulation); s_rp: repack vs plain
                for (int t = 0; t < batch; t++) {
                    const block_q8_K * a = &aq[(size_t) t * nb];
                    std::vector<double> ref(n_out);
                    double ss = 0;
                    for (int o = 0; o < n_out; o++) {
                        ref[o] = ref64(&wb[(size_t) o * nb], a, nb);
                        ss += ref[o] * ref[o];
                    }
                    const double rms = sqrt(ss / n_out);
                    const bool in_gemm = t < batch - batch % 4;
                    for (int o = 0; o < n_out; o++) {
                        const block_q4_K * w = &wb[(size_t) o * nb];
                        const float e_rep = in_gemm ? emu_gemm(w, a, nb) : emu_gemv(w, a, nb);
                        const float e_vd  = emu_vecdot(w, a, nb);
                        const float e_pln = pln_tiled ? emu_tiled(w, a, nb) : e_vd;
                        float vd;
                        ggml_vec_dot_q4_K_q8_K(n_in, &vd, 0, w, 0, a, 0, 1);
                        const size_t i = (size_t) t * n_out + o;
                        add(s_rep, y_rep[i], ref[o], rms, e_rep);
                        add(s_pln, y_pln[i], ref[o], rms, e_pln);
                        add(s_vd, vd, ref[o], rms, e_vd);
                        add(s_rp, y_rep[i], y_pln[i], rms, y_pln[i]);
                    }
                }
                printf("\n%s n_in=%d batch=%d: Q8_K 4x8 vs quantize_row_q8_K: %ld differing fields\n",
                       dist, n_in, batch, act_diff);
                auto row = [](const char * name, const stat & s, const char * emu) {
                    printf("  %-28s max rel %.2e  mean rel %.2e  max/rms %.2e  mean/rms %.2e  bitwise = %s: %ld/%ld\n",
                           name, s.max_rel, s.sum_rel / s.n, s.max_nrm, s.sum_nrm / s.n, emu, s.bitwise, s.n);
                };
                row(batch >= 4 ? (batch % 4 ? "repacked (gemm + gemv) - f64" : "repacked (gemm) - f64") : "repacked (gemv) - f64",
                    s_rep, "its emulation");
                row(pln_tiled ? "plain (tiled) - f64" : "plain (vec_dot) - f64", s_pln, "its emulation");
                row("vec_dot direct - f64", s_vd, "its emulation");
                row("repacked - plain", s_rp, "plain");
            }
        }
    }
    // Q6_K (Gemma 3's other ffn_down type; never repacked on x86): the plain path only, tiled
    // (B >= 8; act-bias MAC: codes +128, weights q-32) or vec_dot, against f64 and each other.
    // ggml's to_float is exact for Q6_K (f16 d x int8 scale x 6-bit code fits in 24 bits).
    {
        const int n_in = 2048, nb = n_in / 256;
        const size_t bsz = ggml_row_size(GGML_TYPE_Q6_K, 256);
        std::vector<float> wf((size_t) n_out * n_in);
        for (float & v : wf) v = 0.02f * nd(rng);
        std::vector<uint8_t> wq((size_t) n_out * nb * bsz);
        ggml_quantize_chunk(GGML_TYPE_Q6_K, wf.data(), wq.data(), 0, n_out, n_in, nullptr);
        std::vector<float> wd((size_t) n_out * n_in);
        ggml_get_type_traits(GGML_TYPE_Q6_K)->to_float(wq.data(), wd.data(), (int64_t) n_out * n_in);
        for (int batch : batches) {
            std::vector<float> x((size_t) batch * n_in);
            for (int i = 0; i < (int) x.size(); i++) x[i] = nd(rng) * ((i % 97 == 13) ? 30.f : 1.f);
            std::vector<block_q8_K> aq((size_t) batch * nb);
            for (int t = 0; t < batch; t++) quantize_row_q8_K(&x[(size_t) t * n_in], &aq[(size_t) t * nb], n_in);
            const std::vector<float> y_pln = run_ggml(be, ggml_backend_cpu_buffer_type(), wq, n_out, n_in, x, batch, GGML_TYPE_Q6_K);
            stat s_pln, s_vd, s_pv;
            for (int t = 0; t < batch; t++) {
                const block_q8_K * a = &aq[(size_t) t * nb];
                std::vector<double> ref(n_out);
                double ss = 0;
                for (int o = 0; o < n_out; o++) {
                    double y = 0;
                    for (int i = 0; i < n_in; i++) y += (double) wd[(size_t) o * n_in + i] * ((double) a[i / 256].d * a[i / 256].qs[i % 256]);
                    ref[o] = y;
                    ss += y * y;
                }
                const double rms = sqrt(ss / n_out);
                for (int o = 0; o < n_out; o++) {
                    float vd;
                    ggml_vec_dot_q6_K_q8_K(n_in, &vd, 0, &wq[(size_t) o * nb * bsz], 0, a, 0, 1);
                    const size_t i = (size_t) t * n_out + o;
                    add(s_pln, y_pln[i], ref[o], rms, vd);
                    add(s_vd, vd, ref[o], rms, vd);
                    add(s_pv, y_pln[i], vd, rms, vd);
                }
            }
            const bool pln_tiled = tiled_on && batch >= 8;
            printf("\nQ6_K outliers n_in=%d batch=%d\n", n_in, batch);
            printf("  %-28s max/rms %.2e  mean/rms %.2e\n", pln_tiled ? "plain (tiled) - f64" : "plain (vec_dot) - f64", s_pln.max_nrm, s_pln.sum_nrm / s_pln.n);
            printf("  %-28s max/rms %.2e  mean/rms %.2e\n", "vec_dot direct - f64", s_vd.max_nrm, s_vd.sum_nrm / s_vd.n);
            printf("  %-28s max/rms %.2e  mean/rms %.2e  bitwise equal: %ld/%ld\n", "plain - vec_dot", s_pv.max_nrm, s_pv.sum_nrm / s_pv.n, s_pv.bitwise, s_pv.n);
        }
    }
    ggml_backend_free(be);
    return 0;
}
