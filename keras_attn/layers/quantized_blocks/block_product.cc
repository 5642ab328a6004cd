// keras_attn: float rows times a matrix kept in GGUF's quantized blocks, as an XLA FFI
// custom call for JAX's CPU backend (keras_attn/layers/quantized_blocks/native.py builds
// and registers it).
//
// y[r, o] = sum_i x[r, i] * W[o, i], where row o of W is stored as GGUF stores a tensor's
// row: `k / block_size` blocks of `block_bytes` each, in one of the formats below (their
// layouts: ggml's `block_q4_0`, `block_q4_1`, `block_q5_0`, `block_q5_1`, `block_q8_0`,
// `block_q4_K`, `block_q6_K`). `mode` 0 expands each block to floats once per call and uses
// it for every row of x (float activations, below); 1 and 2 round x to int8 per 32 and take
// integer dot products (block_product_int8.h, with AVX-512 VNNI). The output rows of a
// large matrix are shared with helper threads (block_threads.h).
//
// Written from the format descriptions; checked against `gguf.quants.dequantize` (the
// reference implementation of the gguf Python package) in tests/layers/test_quantized_blocks.py.

#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <cstdint>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <thread>
#include <type_traits>
#include <vector>

#include "xla/ffi/api/ffi.h"

#if defined(__x86_64__) || defined(_M_X64)
#include <immintrin.h>
#endif

namespace ffi = xla::ffi;

namespace {

inline float half(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t exponent = (h >> 10) & 0x1fu;
  uint32_t mantissa = h & 0x3ffu;
  uint32_t bits;
  if (exponent == 0) {
    float value = static_cast<float>(mantissa) * 5.9604644775390625e-8f;  // 2^-24
    return sign ? -value : value;
  } else if (exponent == 31) {
    bits = sign | 0x7f800000u | (mantissa << 13);
  } else {
    bits = sign | ((exponent + 112) << 23) | (mantissa << 13);
  }
  float out;
  std::memcpy(&out, &bits, 4);
  return out;
}

// Each format: its block size in weights and bytes, and the block's weights as floats.
struct Q4_0 {
  static constexpr int kWeights = 32, kBytes = 18;
  static inline void Expand(const uint8_t* b, float* out) {
    const float d = half(b);
    const uint8_t* q = b + 2;
    for (int j = 0; j < 16; ++j) {
      out[j] = d * static_cast<float>((q[j] & 0x0f) - 8);
      out[j + 16] = d * static_cast<float>((q[j] >> 4) - 8);
    }
  }
};

struct Q4_1 {
  static constexpr int kWeights = 32, kBytes = 20;
  static inline void Expand(const uint8_t* b, float* out) {
    const float d = half(b), m = half(b + 2);
    const uint8_t* q = b + 4;
    for (int j = 0; j < 16; ++j) {
      out[j] = d * static_cast<float>(q[j] & 0x0f) + m;
      out[j + 16] = d * static_cast<float>(q[j] >> 4) + m;
    }
  }
};

// Q5: the 32 five-bit values of a block, the fifth bit of weight j being bit j of the
// little-endian 32-bit `qh`.
inline void FiveBits(const uint8_t* qh_bytes, const uint8_t* qs, int* values) {
  uint32_t high;
  std::memcpy(&high, qh_bytes, 4);
  for (int j = 0; j < 16; ++j) {
    values[j] = (qs[j] & 0x0f) | (((high >> j) & 1u) << 4);
    values[j + 16] = (qs[j] >> 4) | (((high >> (j + 16)) & 1u) << 4);
  }
}

struct Q5_0 {
  static constexpr int kWeights = 32, kBytes = 22;
  static inline void Expand(const uint8_t* b, float* out) {
    const float d = half(b);
    int values[32];
    FiveBits(b + 2, b + 6, values);
    for (int j = 0; j < 32; ++j) out[j] = d * static_cast<float>(values[j] - 16);
  }
};

struct Q5_1 {
  static constexpr int kWeights = 32, kBytes = 24;
  static inline void Expand(const uint8_t* b, float* out) {
    const float d = half(b), m = half(b + 2);
    int values[32];
    FiveBits(b + 4, b + 8, values);
    for (int j = 0; j < 32; ++j) out[j] = d * static_cast<float>(values[j]) + m;
  }
};

struct Q8_0 {
  static constexpr int kWeights = 32, kBytes = 34;
  static inline void Expand(const uint8_t* b, float* out) {
    const float d = half(b);
    const int8_t* q = reinterpret_cast<const int8_t*>(b + 2);
    for (int j = 0; j < 32; ++j) out[j] = d * static_cast<float>(q[j]);
  }
};

// Q4_K: a super-block of 256 weights in 8 sub-blocks of 32, each with a 6-bit scale and
// a 6-bit minimum packed into 12 bytes; w = d * scale_j * q - dmin * min_j.
struct Q4_K {
  static constexpr int kWeights = 256, kBytes = 144;
  static inline void ScaleMin(int j, const uint8_t* s, int* scale, int* minimum) {
    if (j < 4) {
      *scale = s[j] & 63;
      *minimum = s[j + 4] & 63;
    } else {
      *scale = (s[j + 4] & 0x0f) | ((s[j - 4] >> 6) << 4);
      *minimum = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
    }
  }
  static inline void Expand(const uint8_t* b, float* out) {
    const float d = half(b), dmin = half(b + 2);
    const uint8_t* scales = b + 4;
    const uint8_t* q = b + 16;
    for (int chunk = 0; chunk < 4; ++chunk) {
      int s1, m1, s2, m2;
      ScaleMin(2 * chunk, scales, &s1, &m1);
      ScaleMin(2 * chunk + 1, scales, &s2, &m2);
      const float d1 = d * s1, o1 = dmin * m1, d2 = d * s2, o2 = dmin * m2;
      for (int l = 0; l < 32; ++l) {
        out[64 * chunk + l] = d1 * static_cast<float>(q[l] & 0x0f) - o1;
        out[64 * chunk + 32 + l] = d2 * static_cast<float>(q[l] >> 4) - o2;
      }
      q += 32;
    }
  }
};

// Q6_K: 256 weights as 4 low bits (ql) and 2 high bits (qh), 16 int8 scales of 16 each,
// w = d * scale * (q - 32).
struct Q6_K {
  static constexpr int kWeights = 256, kBytes = 210;
  static inline void Expand(const uint8_t* b, float* out) {
    const uint8_t* ql = b;
    const uint8_t* qh = b + 128;
    const int8_t* sc = reinterpret_cast<const int8_t*>(b + 192);
    const float d = half(b + 208);
    for (int half_block = 0; half_block < 2; ++half_block) {
      for (int l = 0; l < 32; ++l) {
        const int is = l / 16;
        const int q1 = ((ql[l] & 0x0f) | (((qh[l] >> 0) & 3) << 4)) - 32;
        const int q2 = ((ql[l + 32] & 0x0f) | (((qh[l] >> 2) & 3) << 4)) - 32;
        const int q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
        const int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
        out[l] = d * sc[is] * q1;
        out[l + 32] = d * sc[is + 2] * q2;
        out[l + 64] = d * sc[is + 4] * q3;
        out[l + 96] = d * sc[is + 6] * q4;
      }
      out += 128;
      ql += 64;
      qh += 32;
      sc += 8;
    }
  }
};

// The format codes (native.py's FORMAT_CODES): GGUF's own type numbers.
enum Format : int32_t {
  kQ4_0 = 2, kQ4_1 = 3, kQ5_0 = 6, kQ5_1 = 7, kQ8_0 = 8, kQ4_K = 12, kQ6_K = 14
};


#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__F16C__)
#define KERAS_ATTN_AVX512 1

// AVX-512: weights 32 at a time, as two vectors of 16 floats (`Expand2`, sub-block `s`
// of a block), multiplied into two accumulators per row of x.
inline __m512 Unsigned16(__m128i bytes) {
  return _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(bytes));
}
inline __m128i Low(__m128i v) { return _mm_and_si128(v, _mm_set1_epi8(0x0f)); }
inline __m128i High(__m128i v) { return _mm_and_si128(_mm_srli_epi16(v, 4), _mm_set1_epi8(0x0f)); }
inline __m128i Load16(const uint8_t* p) {
  return _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
}
inline float Half(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return _cvtsh_ss(h);
}

template <typename F>
struct Wide;

template <>
struct Wide<Q4_0> {
  static inline void Expand2(const uint8_t* b, int, __m512& w0, __m512& w1) {
    const __m512 d = _mm512_set1_ps(Half(b));
    const __m512 eight = _mm512_set1_ps(8.f);
    const __m128i q = Load16(b + 2);
    w0 = _mm512_mul_ps(d, _mm512_sub_ps(Unsigned16(Low(q)), eight));
    w1 = _mm512_mul_ps(d, _mm512_sub_ps(Unsigned16(High(q)), eight));
  }
};

template <>
struct Wide<Q4_1> {
  static inline void Expand2(const uint8_t* b, int, __m512& w0, __m512& w1) {
    const __m512 d = _mm512_set1_ps(Half(b)), m = _mm512_set1_ps(Half(b + 2));
    const __m128i q = Load16(b + 4);
    w0 = _mm512_fmadd_ps(d, Unsigned16(Low(q)), m);
    w1 = _mm512_fmadd_ps(d, Unsigned16(High(q)), m);
  }
};

// Q5: the fifth bit of weight j is bit j of the 32-bit `qh`; 16 is added where it is set.
inline void Fifth(const uint8_t* qh_bytes, const uint8_t* qs, __m512i& low, __m512i& up) {
  uint32_t qh;
  std::memcpy(&qh, qh_bytes, 4);
  const __m128i q = Load16(qs);
  const __m512i sixteen = _mm512_set1_epi32(16);
  low = _mm512_cvtepu8_epi32(Low(q));
  up = _mm512_cvtepu8_epi32(High(q));
  low = _mm512_mask_add_epi32(low, static_cast<__mmask16>(qh & 0xffffu), low, sixteen);
  up = _mm512_mask_add_epi32(up, static_cast<__mmask16>(qh >> 16), up, sixteen);
}

template <>
struct Wide<Q5_0> {
  static inline void Expand2(const uint8_t* b, int, __m512& w0, __m512& w1) {
    const __m512 d = _mm512_set1_ps(Half(b));
    __m512i low, up;
    Fifth(b + 2, b + 6, low, up);
    const __m512i sixteen = _mm512_set1_epi32(16);
    w0 = _mm512_mul_ps(d, _mm512_cvtepi32_ps(_mm512_sub_epi32(low, sixteen)));
    w1 = _mm512_mul_ps(d, _mm512_cvtepi32_ps(_mm512_sub_epi32(up, sixteen)));
  }
};

template <>
struct Wide<Q5_1> {
  static inline void Expand2(const uint8_t* b, int, __m512& w0, __m512& w1) {
    const __m512 d = _mm512_set1_ps(Half(b)), m = _mm512_set1_ps(Half(b + 2));
    __m512i low, up;
    Fifth(b + 4, b + 8, low, up);
    w0 = _mm512_fmadd_ps(d, _mm512_cvtepi32_ps(low), m);
    w1 = _mm512_fmadd_ps(d, _mm512_cvtepi32_ps(up), m);
  }
};

template <>
struct Wide<Q8_0> {
  static inline void Expand2(const uint8_t* b, int, __m512& w0, __m512& w1) {
    const __m512 d = _mm512_set1_ps(Half(b));
    w0 = _mm512_mul_ps(d, _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(Load16(b + 2))));
    w1 = _mm512_mul_ps(d, _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(Load16(b + 18))));
  }
};

template <>
struct Wide<Q4_K> {
  static inline void Expand2(const uint8_t* b, int s, __m512& w0, __m512& w1) {
    int scale, minimum;
    Q4_K::ScaleMin(s, b + 4, &scale, &minimum);
    const __m512 d = _mm512_set1_ps(Half(b) * scale);
    const __m512 m = _mm512_set1_ps(Half(b + 2) * minimum);
    const uint8_t* q = b + 16 + 32 * (s / 2);
    const __m128i q0 = Load16(q), q1 = Load16(q + 16);
    if (s % 2 == 0) {
      w0 = _mm512_fmsub_ps(d, Unsigned16(Low(q0)), m);
      w1 = _mm512_fmsub_ps(d, Unsigned16(Low(q1)), m);
    } else {
      w0 = _mm512_fmsub_ps(d, Unsigned16(High(q0)), m);
      w1 = _mm512_fmsub_ps(d, Unsigned16(High(q1)), m);
    }
  }
};

template <>
struct Wide<Q6_K> {
  static inline __m512 Part(__m128i ql, __m128i qh, int p, float scale) {
    const __m128i low = (p >> 1) ? High(ql) : Low(ql);
    const __m128i high = _mm_and_si128(_mm_srli_epi16(qh, 2 * p), _mm_set1_epi8(3));
    const __m128i q = _mm_or_si128(low, _mm_slli_epi16(high, 4));
    const __m512 centred = _mm512_sub_ps(Unsigned16(q), _mm512_set1_ps(32.f));
    return _mm512_mul_ps(_mm512_set1_ps(scale), centred);
  }
  static inline void Expand2(const uint8_t* b, int s, __m512& w0, __m512& w1) {
    const int half_block = s / 4, p = s % 4;
    const uint8_t* ql = b + 64 * half_block + 32 * (p & 1);
    const uint8_t* qh = b + 128 + 32 * half_block;
    const int8_t* sc = reinterpret_cast<const int8_t*>(b + 192) + 8 * half_block + 2 * p;
    const float d = Half(b + 208);
    w0 = Part(Load16(ql), Load16(qh), p, d * sc[0]);
    w1 = Part(Load16(ql + 16), Load16(qh + 16), p, d * sc[1]);
  }
};

template <typename F, int kRows>
void Rows(const float* x, int64_t k, const uint8_t* w, int64_t row_bytes, float* y,
          int64_t m, int64_t r0, int64_t begin, int64_t end) {
  constexpr int kW = F::kWeights;
  const int64_t blocks = k / kW;
  for (int64_t o = begin; o < end; ++o) {
    const uint8_t* row = w + o * row_bytes;
    __m512 a[kRows], c[kRows];
    for (int r = 0; r < kRows; ++r) a[r] = c[r] = _mm512_setzero_ps();
    for (int64_t b = 0; b < blocks; ++b) {
      const uint8_t* block = row + b * F::kBytes;
      for (int s = 0; s < kW / 32; ++s) {
        __m512 w0, w1;
        Wide<F>::Expand2(block, s, w0, w1);
        for (int r = 0; r < kRows; ++r) {
          const float* xr = x + (r0 + r) * k + b * kW + 32 * s;
          a[r] = _mm512_fmadd_ps(w0, _mm512_loadu_ps(xr), a[r]);
          c[r] = _mm512_fmadd_ps(w1, _mm512_loadu_ps(xr + 16), c[r]);
        }
      }
    }
    for (int r = 0; r < kRows; ++r) {
      y[(r0 + r) * m + o] = _mm512_reduce_add_ps(_mm512_add_ps(a[r], c[r]));
    }
  }
}

#else

// Output rows [begin, end) of y for `kRows` rows of x starting at `r0` (portable).
template <typename F, int kRows>
void Rows(const float* x, int64_t k, const uint8_t* w, int64_t row_bytes, float* y,
          int64_t m, int64_t r0, int64_t begin, int64_t end) {
  constexpr int kW = F::kWeights;
  const int64_t blocks = k / kW;
  alignas(64) float weights[kW];
  for (int64_t o = begin; o < end; ++o) {
    const uint8_t* row = w + o * row_bytes;
    alignas(64) float acc[kRows][16] = {};
    for (int64_t b = 0; b < blocks; ++b) {
      F::Expand(row + b * F::kBytes, weights);
      for (int r = 0; r < kRows; ++r) {
        const float* xr = x + (r0 + r) * k + b * kW;
        for (int i = 0; i < kW; i += 16) {
          for (int j = 0; j < 16; ++j) acc[r][j] += weights[i + j] * xr[i + j];
        }
      }
    }
    for (int r = 0; r < kRows; ++r) {
      float sum = 0.f;
      for (int j = 0; j < 16; ++j) sum += acc[r][j];
      y[(r0 + r) * m + o] = sum;
    }
  }
}

#endif  // KERAS_ATTN_AVX512


#include "block_product_int8.h"

template <typename F>
void Product(const float* x, int64_t n, int64_t k, const uint8_t* w, int64_t row_bytes,
             float* y, int64_t m, int64_t begin, int64_t end) {
  int64_t r0 = 0;
  for (; r0 + 4 <= n; r0 += 4) Rows<F, 4>(x, k, w, row_bytes, y, m, r0, begin, end);
  for (; r0 + 2 <= n; r0 += 2) Rows<F, 2>(x, k, w, row_bytes, y, m, r0, begin, end);
  for (; r0 < n; ++r0) Rows<F, 1>(x, k, w, row_bytes, y, m, r0, begin, end);
}

using ProductFn = void (*)(const float*, int64_t, int64_t, const uint8_t*, int64_t, float*,
                           int64_t, int64_t, int64_t);

ProductFn ProductFor(int32_t format, int* weights, int* bytes) {
#define KERAS_ATTN_FORMAT(code, F) \
  case code:                       \
    *weights = F::kWeights;        \
    *bytes = F::kBytes;            \
    return &Product<F>;
  switch (format) {
    KERAS_ATTN_FORMAT(kQ4_0, Q4_0)
    KERAS_ATTN_FORMAT(kQ4_1, Q4_1)
    KERAS_ATTN_FORMAT(kQ5_0, Q5_0)
    KERAS_ATTN_FORMAT(kQ5_1, Q5_1)
    KERAS_ATTN_FORMAT(kQ8_0, Q8_0)
    KERAS_ATTN_FORMAT(kQ4_K, Q4_K)
    KERAS_ATTN_FORMAT(kQ6_K, Q6_K)
    default:
      return nullptr;
  }
#undef KERAS_ATTN_FORMAT
}

#include "block_threads.h"

// Output rows [0, m) by `work(begin, end)`: on the calling thread alone for a matrix of
// up to `kShareBytes`, else in parts of at least that many bytes, two per thread,
// shared with the helpers. Measured (Gemma 3's 180 MB head, 2 cores): parts of 64 rows
// were no faster than one thread (each part restarts the hardware prefetcher's stream).
constexpr int64_t kShareBytes = int64_t{1} << 16;

template <typename Work>
void Shared(int64_t pool_threads, int64_t m, int64_t row_bytes, Work work) {
  Helpers& helpers = Helpers::Get(pool_threads);
  const int64_t most = 2 * (helpers.threads() + 1);
  const int64_t parts = std::min<int64_t>(most, m * row_bytes / kShareBytes);
  if (parts <= 1) {
    work(0, m);
    return;
  }
  auto job = std::make_shared<Job>();
  job->work = work;
  job->m = m;
  job->part = (m + parts - 1) / parts;
  job->parts = (m + job->part - 1) / job->part;
  helpers.Run(job);
}

// `mode`: 0 float activations; 1 activations rounded to int8 per 32 (VNNI); 2 the same,
// the rows repacked by eights (Q4_0x8 / Q4_1x8).
ffi::Error BlockProductImpl(ffi::ThreadPool pool, ffi::Buffer<ffi::F32> x,
                            ffi::Buffer<ffi::U8> w, ffi::ResultBuffer<ffi::F32> y,
                            int32_t format, int32_t mode) {
  auto xd = x.dimensions();
  auto wd = w.dimensions();
  if (xd.size() != 2 || wd.size() != 2) {
    return ffi::Error::InvalidArgument("block_product: x and w must be 2-D");
  }
  int weights = 0, bytes = 0;
  ProductFn fn = ProductFor(format, &weights, &bytes);
  if (fn == nullptr) return ffi::Error::InvalidArgument("block_product: unknown format");
  const int64_t n = xd[0], k = xd[1], m = wd[0], row_bytes = wd[1];
  if (k % weights != 0 || row_bytes != (k / weights) * bytes) {
    return ffi::Error::InvalidArgument("block_product: w's rows do not hold x's columns");
  }
  if (mode < 0 || mode > 2) return ffi::Error::InvalidArgument("block_product: unknown mode");
  const float* xp = x.typed_data();
  const uint8_t* wp = w.typed_data();
  float* yp = y->typed_data();
  if (mode == 0) {
    Shared(pool.num_threads(), m, row_bytes, [=](int64_t begin, int64_t end) {
      fn(xp, n, k, wp, row_bytes, yp, m, begin, end);
    });
    return ffi::Error::Success();
  }
#ifdef KERAS_ATTN_X8
  if (mode == 2 && format != kQ4_0 && format != kQ4_1) {
    return ffi::Error::InvalidArgument("block_product: x8 is Q4_0 or Q4_1 only");
  }
  if (mode == 2 && m % 8 != 0) {
    return ffi::Error::InvalidArgument("block_product: x8 rows not by eights");
  }
  auto activations = std::make_shared<Activations>();
  Quantize(xp, n, k, activations.get());
  const Activations* a = activations.get();
  if (mode == 2) {
    const bool minimum = format == kQ4_1;
    Shared(pool.num_threads(), m / 8, 8 * row_bytes, [=](int64_t begin, int64_t end) {
      if (minimum) {
        ProductX8<true>(*a, n, k, wp, row_bytes, yp, m, 8 * begin, 8 * end);
      } else {
        ProductX8<false>(*a, n, k, wp, row_bytes, yp, m, 8 * begin, 8 * end);
      }
    });
  } else {
    Int8Fn product = Int8For(format);
    Shared(pool.num_threads(), m, row_bytes, [=](int64_t begin, int64_t end) {
      product(*a, n, k, wp, row_bytes, yp, m, begin, end);
    });
  }
  return ffi::Error::Success();
#else
  return ffi::Error::InvalidArgument("block_product: built without AVX-512 VNNI (int8)");
#endif
}

}  // namespace

XLA_FFI_DEFINE_HANDLER_SYMBOL(KerasAttnBlockProduct, BlockProductImpl,
                              ffi::Ffi::Bind()
                                  .Ctx<ffi::ThreadPool>()
                                  .Arg<ffi::Buffer<ffi::F32>>()
                                  .Arg<ffi::Buffer<ffi::U8>>()
                                  .Ret<ffi::Buffer<ffi::F32>>()
                                  .Attr<int32_t>("format")
                                  .Attr<int32_t>("mode"));

// What this build multiplies: 1 with AVX-512, 2 more with the int8 (VNNI) products.
extern "C" int KerasAttnBlockFeatures() {
  int features = 0;
#ifdef KERAS_ATTN_AVX512
  features |= 1;
#endif
#ifdef KERAS_ATTN_X8
  features |= 2;
#endif
  return features;
}
