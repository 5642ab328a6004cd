// keras_attn: the int8 products of block_product.cc (included there, inside its
// namespace), where the build has AVX-512 VNNI: the activations are rounded to int8 per
// block of 32 (step max|x| / 127), as llama.cpp's products round them, and each block's
// integer dot products come from `vpdpbusd` (unsigned weights times signed activations,
// summed by fours into 8 int32 lanes).

#if defined(KERAS_ATTN_AVX512) && defined(__AVX512VNNI__) && defined(__AVX512VL__)
#define KERAS_ATTN_X8 1

// x rounded to int8 per 32 columns: the int8 values, each block's step and step * sum(q),
// and each block's negated sums of q by fours (the 8 lanes a `vpdpbusd` of the block
// fills), from which a format's zero point is taken off in integers.
struct Activations {
  std::vector<int8_t> q;  // (n, k)
  std::vector<float> scale, sum;  // (n, k / 32)
  std::vector<int32_t> negated;  // (n, k / 32, 8)
};

void Quantize(const float* x, int64_t n, int64_t k, Activations* a) {
  const int64_t blocks = k / 32;
  a->q.resize(n * k);
  a->scale.resize(n * blocks);
  a->sum.resize(n * blocks);
  a->negated.resize(n * blocks * 8);
  for (int64_t i = 0; i < n * blocks; ++i) {
    const float* v = x + i * 32;
    float top = 0.f;
    bool finite = true;
    for (int j = 0; j < 32; ++j) {
      top = std::max(top, std::fabs(v[j]));
      finite = finite && std::isfinite(v[j]);
    }
    if (!finite) top = std::numeric_limits<float>::quiet_NaN();  // NaN out, as floats give
    const float step = top / 127.f, inverse = top > 0.f ? 127.f / top : 0.f;
    int total = 0;
    for (int j = 0; j < 32; ++j) {
      const int q = static_cast<int>(std::nearbyint(v[j] * inverse));
      a->q[i * 32 + j] = static_cast<int8_t>(q);
      total += q;
    }
    for (int lane = 0; lane < 8; ++lane) {
      const int8_t* q = a->q.data() + i * 32 + 4 * lane;
      a->negated[i * 8 + lane] = -(q[0] + q[1] + q[2] + q[3]);
    }
    a->scale[i] = step;
    a->sum[i] = step * static_cast<float>(total);
  }
}

// One block of 32 weights of each 32-weight format as unsigned bytes u in weight order,
// the weights being d * (u - zero) (`kZeroShift`: log2 of the zero point) or d * u + m.
inline __m256i Nibbles(const uint8_t* qs) {  // weights 0-15 low nibbles, 16-31 high
  const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs));
  const __m128i low = _mm_set1_epi8(0x0f);
  return _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(v, 4), low), _mm_and_si128(v, low));
}
inline __m256i WithFifthBits(__m256i u, const uint8_t* qh) {  // bit j of qh: 16 on weight j
  uint32_t high;
  std::memcpy(&high, qh, 4);
  return _mm256_or_si256(u, _mm256_maskz_mov_epi8(high, _mm256_set1_epi8(16)));
}

template <typename F>
struct Int8;
template <>
struct Int8<Q4_0> {
  static constexpr int kZeroShift = 3, kMinimum = 0;
  static __m256i U(const uint8_t* b) { return Nibbles(b + 2); }
};
template <>
struct Int8<Q4_1> {
  static constexpr int kZeroShift = -1, kMinimum = 2;
  static __m256i U(const uint8_t* b) { return Nibbles(b + 4); }
};
template <>
struct Int8<Q5_0> {
  static constexpr int kZeroShift = 4, kMinimum = 0;
  static __m256i U(const uint8_t* b) { return WithFifthBits(Nibbles(b + 6), b + 2); }
};
template <>
struct Int8<Q5_1> {
  static constexpr int kZeroShift = -1, kMinimum = 2;
  static __m256i U(const uint8_t* b) { return WithFifthBits(Nibbles(b + 8), b + 4); }
};
template <>
struct Int8<Q8_0> {  // int8 weights q: u = q + 128
  static constexpr int kZeroShift = 7, kMinimum = 0;
  static __m256i U(const uint8_t* b) {
    const __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + 2));
    return _mm256_xor_si256(q, _mm256_set1_epi8(static_cast<char>(0x80)));
  }
};

// The 8 lanes' int32 dot products of u with activation block `i`, the zero point taken off.
template <int kZeroShift>
inline __m256i Dot(__m256i u, const Activations& a, int64_t i) {
  __m256i start = _mm256_setzero_si256();
  if (kZeroShift >= 0) {
    start = _mm256_slli_epi32(
        _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.negated.data() + i * 8)),
        kZeroShift);
  }
  const __m256i x = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.q.data() + i * 32));
  return _mm256_dpbusd_epi32(start, u, x);
}

inline float Sum8(__m256 v) {
  const __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  const __m128 t = _mm_add_ps(s, _mm_movehl_ps(s, s));
  return _mm_cvtss_f32(_mm_add_ss(t, _mm_movehdup_ps(t)));
}

// Output rows [begin, end) for `kTile` rows of x from `r0`, a 32-weight format: each
// block unpacked once for the tile's rows.
template <typename F, int kTile>
void TileInt8(const Activations& a, int64_t r0, int64_t k, const uint8_t* w, int64_t row_bytes,
              float* y, int64_t m, int64_t begin, int64_t end) {
  using I = Int8<F>;
  const int64_t blocks = k / 32;
  for (int64_t o = begin; o < end; ++o) {
    const uint8_t* row = w + o * row_bytes;
    __m256 acc[kTile];
    float minimum[kTile];
    for (int t = 0; t < kTile; ++t) acc[t] = _mm256_setzero_ps(), minimum[t] = 0.f;
    for (int64_t j = 0; j < blocks; ++j) {
      const uint8_t* b = row + j * F::kBytes;
      const __m256i u = I::U(b);
      const float d = Half(b);
      for (int t = 0; t < kTile; ++t) {
        const int64_t i = (r0 + t) * blocks + j;
        const __m256i dot = Dot<I::kZeroShift>(u, a, i);
        acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot), _mm256_set1_ps(d * a.scale[i]), acc[t]);
        if (I::kMinimum) minimum[t] += Half(b + I::kMinimum) * a.sum[i];
      }
    }
    for (int t = 0; t < kTile; ++t) y[(r0 + t) * m + o] = Sum8(acc[t]) + minimum[t];
  }
}

// Q4_K: each 32 bytes of nibbles hold sub-blocks 2c (low) and 2c + 1 (high), weights
// d * scale_s * u - dmin * min_s.
template <int kTile>
void TileInt8Q4K(const Activations& a, int64_t r0, int64_t k, const uint8_t* w,
                 int64_t row_bytes, float* y, int64_t m, int64_t begin, int64_t end) {
  const int64_t blocks = k / 32, supers = k / 256;
  const __m256i low = _mm256_set1_epi8(0x0f);
  for (int64_t o = begin; o < end; ++o) {
    const uint8_t* row = w + o * row_bytes;
    __m256 acc[kTile];
    float minimum[kTile];
    for (int t = 0; t < kTile; ++t) acc[t] = _mm256_setzero_ps(), minimum[t] = 0.f;
    for (int64_t j = 0; j < supers; ++j) {
      const uint8_t* b = row + j * Q4_K::kBytes;
      const float d = Half(b), dmin = Half(b + 2);
      for (int c = 0; c < 4; ++c) {
        const __m256i bytes = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + 16 + 32 * c));
        const __m256i u[2] = {_mm256_and_si256(bytes, low),
                              _mm256_and_si256(_mm256_srli_epi16(bytes, 4), low)};
        for (int h = 0; h < 2; ++h) {
          int scale, min_s;
          Q4_K::ScaleMin(2 * c + h, b + 4, &scale, &min_s);
          for (int t = 0; t < kTile; ++t) {
            const int64_t i = (r0 + t) * blocks + 8 * j + 2 * c + h;
            const __m256i dot = Dot<-1>(u[h], a, i);
            acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot),
                                     _mm256_set1_ps(d * scale * a.scale[i]), acc[t]);
            minimum[t] -= dmin * min_s * a.sum[i];
          }
        }
      }
    }
    for (int t = 0; t < kTile; ++t) y[(r0 + t) * m + o] = Sum8(acc[t]) + minimum[t];
  }
}

// Q6_K: per half of 128 weights, 32 bytes of low bits ql0 and ql1 and 32 of high bits qh
// give 4 blocks of 32 (6 bits each, zero 32), their halves of 16 scaled by int8 scales.
template <int kTile>
void TileInt8Q6K(const Activations& a, int64_t r0, int64_t k, const uint8_t* w,
                 int64_t row_bytes, float* y, int64_t m, int64_t begin, int64_t end) {
  const int64_t blocks = k / 32, supers = k / 256;
  const __m256i low = _mm256_set1_epi8(0x0f), three = _mm256_set1_epi8(3);
  for (int64_t o = begin; o < end; ++o) {
    const uint8_t* row = w + o * row_bytes;
    __m256 acc[kTile];
    for (int t = 0; t < kTile; ++t) acc[t] = _mm256_setzero_ps();
    for (int64_t j = 0; j < supers; ++j) {
      const uint8_t* b = row + j * Q6_K::kBytes;
      const float d = Half(b + 208);
      for (int h = 0; h < 2; ++h) {
        const uint8_t* ql = b + 64 * h;
        const __m256i ql0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(ql));
        const __m256i ql1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(ql + 32));
        const __m256i qh =
            _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + 128 + 32 * h));
        const int8_t* sc = reinterpret_cast<const int8_t*>(b + 192) + 8 * h;
        // 4 low bits, and 2 high bits from qh at `shift`, into 6-bit values
        auto six = [&](__m256i four, int shift) {
          const __m256i two = _mm256_and_si256(_mm256_srli_epi16(qh, shift), three);
          return _mm256_or_si256(_mm256_and_si256(four, low), _mm256_slli_epi16(two, 4));
        };
        const __m256i u[4] = {six(ql0, 0), six(ql1, 2), six(_mm256_srli_epi16(ql0, 4), 4),
                              six(_mm256_srli_epi16(ql1, 4), 6)};
        for (int c = 0; c < 4; ++c) {
          const __m256 scales = _mm256_set_m128(_mm_set1_ps(d * sc[2 * c + 1]),
                                                _mm_set1_ps(d * sc[2 * c]));
          for (int t = 0; t < kTile; ++t) {
            const int64_t i = (r0 + t) * blocks + 8 * j + 4 * h + c;
            const __m256i dot = Dot<5>(u[c], a, i);
            acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot),
                                     _mm256_mul_ps(scales, _mm256_set1_ps(a.scale[i])), acc[t]);
          }
        }
      }
    }
    for (int t = 0; t < kTile; ++t) y[(r0 + t) * m + o] = Sum8(acc[t]);
  }
}

// Every tile of x's rows: 4, then 2, then 1 at a time.
template <typename F, int kTile>
void TileOf(const Activations& a, int64_t r0, int64_t k, const uint8_t* w, int64_t row_bytes,
            float* y, int64_t m, int64_t begin, int64_t end) {
  if constexpr (std::is_same_v<F, Q4_K>) {
    TileInt8Q4K<kTile>(a, r0, k, w, row_bytes, y, m, begin, end);
  } else if constexpr (std::is_same_v<F, Q6_K>) {
    TileInt8Q6K<kTile>(a, r0, k, w, row_bytes, y, m, begin, end);
  } else {
    TileInt8<F, kTile>(a, r0, k, w, row_bytes, y, m, begin, end);
  }
}

template <typename F>
void ProductInt8(const Activations& a, int64_t n, int64_t k, const uint8_t* w,
                 int64_t row_bytes, float* y, int64_t m, int64_t begin, int64_t end) {
  int64_t r = 0;
  for (; r + 4 <= n; r += 4) TileOf<F, 4>(a, r, k, w, row_bytes, y, m, begin, end);
  for (; r + 2 <= n; r += 2) TileOf<F, 2>(a, r, k, w, row_bytes, y, m, begin, end);
  for (; r < n; ++r) TileOf<F, 1>(a, r, k, w, row_bytes, y, m, begin, end);
}

using Int8Fn = void (*)(const Activations&, int64_t, int64_t, const uint8_t*, int64_t, float*,
                        int64_t, int64_t, int64_t);

Int8Fn Int8For(int32_t format) {
  switch (format) {
    case kQ4_0: return &ProductInt8<Q4_0>;
    case kQ4_1: return &ProductInt8<Q4_1>;
    case kQ5_0: return &ProductInt8<Q5_0>;
    case kQ5_1: return &ProductInt8<Q5_1>;
    case kQ8_0: return &ProductInt8<Q8_0>;
    case kQ4_K: return &ProductInt8<Q4_K>;
    case kQ6_K: return &ProductInt8<Q6_K>;
    default: return nullptr;
  }
}

// Q4_0 and Q4_1 repacked by eights of rows ("Q4_0x8", "Q4_1x8": block_formats.repack):
// for each block j of the 8 rows, their 8 half-precision scales, then (Q4_1) their 8
// minimums, then the nibbles in 4 chunks of 32 bytes, chunk c holding bytes 4c..4c+3 of
// each row in turn. A chunk's low nibbles are weights 4c..4c+3 of the 8 rows and its high
// nibbles weights 16+4c..16+4c+3, so one `vpdpbusd` multiplies them by 4 activations for
// all 8 rows at once; the 8 rows' sums accumulate in 8 lanes.
// Rows `r0 .. r0 + kTile` of x by the 8-row groups of output rows [begin, end): each
// group's block is unpacked once for the tile's rows.
template <bool kMinimum, int kTile>
void TileX8(const Activations& a, int64_t r0, int64_t k, const uint8_t* w, int64_t row_bytes,
            float* y, int64_t m, int64_t begin, int64_t end) {
  constexpr int kBlock = kMinimum ? 160 : 144;  // 8 rows' blocks of 20 or 18 bytes
  const int64_t blocks = k / 32;
  const __m256i low = _mm256_set1_epi8(0x0f);
  for (int64_t o = begin; o < end; o += 8) {
    const uint8_t* group = w + o * row_bytes;
    __m256 acc[kTile];
    for (int t = 0; t < kTile; ++t) acc[t] = _mm256_setzero_ps();
    for (int64_t j = 0; j < blocks; ++j) {
      const uint8_t* b = group + j * kBlock;
      const uint8_t* q = b + (kMinimum ? 32 : 16);
      __m256i lo[4], hi[4];
      for (int c = 0; c < 4; ++c) {
        const __m256i bytes = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q + 32 * c));
        lo[c] = _mm256_and_si256(bytes, low);
        hi[c] = _mm256_and_si256(_mm256_srli_epi16(bytes, 4), low);
      }
      const __m256 d = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b)));
      __m256 mins = _mm256_setzero_ps();
      if (kMinimum) {
        mins = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b + 16)));
      }
      for (int t = 0; t < kTile; ++t) {
        const int64_t r = r0 + t;
        const int8_t* xb = a.q.data() + r * k + j * 32;
        const float step = a.scale[r * blocks + j], sum = a.sum[r * blocks + j];
        __m256i dot = _mm256_setzero_si256();
        for (int c = 0; c < 4; ++c) {
          int32_t x_low, x_high;
          std::memcpy(&x_low, xb + 4 * c, 4);
          std::memcpy(&x_high, xb + 16 + 4 * c, 4);
          dot = _mm256_dpbusd_epi32(dot, lo[c], _mm256_set1_epi32(x_low));
          dot = _mm256_dpbusd_epi32(dot, hi[c], _mm256_set1_epi32(x_high));
        }
        acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot), _mm256_mul_ps(d, _mm256_set1_ps(step)),
                                 acc[t]);
        if (kMinimum) {  // + m * sum(x)
          acc[t] = _mm256_fmadd_ps(mins, _mm256_set1_ps(sum), acc[t]);
        } else {  // the weights are d * (q - 8)
          acc[t] = _mm256_fnmadd_ps(d, _mm256_set1_ps(8.f * sum), acc[t]);
        }
      }
    }
    for (int t = 0; t < kTile; ++t) _mm256_storeu_ps(y + (r0 + t) * m + o, acc[t]);
  }
}

template <bool kMinimum>
void ProductX8(const Activations& a, int64_t n, int64_t k, const uint8_t* w, int64_t row_bytes,
               float* y, int64_t m, int64_t begin, int64_t end) {
  int64_t r = 0;
  for (; r + 8 <= n; r += 8) TileX8<kMinimum, 8>(a, r, k, w, row_bytes, y, m, begin, end);
  for (; r + 2 <= n; r += 2) TileX8<kMinimum, 2>(a, r, k, w, row_bytes, y, m, begin, end);
  for (; r < n; ++r) TileX8<kMinimum, 1>(a, r, k, w, row_bytes, y, m, begin, end);
}

#endif  // KERAS_ATTN_X8
