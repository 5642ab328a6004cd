// keras_attn: the threads that share a product's output rows with the calling thread
// (included by block_product.cc, inside its namespace). One helper per other core the
// process may run on (at most XLA's intra-op pool size), started on first use. Between
// products a helper spins for up to `kSpinMicroseconds` and then sleeps: decoding calls
// the products back to back, and a helper woken from sleep arrives after a small product
// is done (measured on 2 cores: XLA's own pool, woken per product, made decoding no
// faster; llama.cpp's workers spin the same way). One product at a time has the helpers;
// another running meanwhile (another XLA computation) multiplies on its own thread.

constexpr int64_t kSpinMicroseconds = 2000;

inline void Pause() {
#if defined(__x86_64__) || defined(_M_X64)
  _mm_pause();
#else
  std::this_thread::yield();
#endif
}

// Output rows [0, m) in `parts` ranges of `part` rows, taken from a counter: a helper
// that arrives late (or never) only leaves more to the others.
struct Job {
  std::function<void(int64_t, int64_t)> work;
  int64_t m = 0, part = 0, parts = 0;
  std::atomic<int64_t> next{0}, done{0};

  void Help() {
    for (;;) {
      const int64_t p = next.fetch_add(1);
      if (p >= parts) return;
      work(p * part, std::min(m, (p + 1) * part));
      done.fetch_add(1);
    }
  }
};

class Helpers {
 public:
  // The process's helpers (never destroyed: they may still wait when the process exits).
  static Helpers& Get(int64_t pool_threads) {
    static Helpers* helpers = new Helpers(pool_threads);
    return *helpers;
  }

  int64_t threads() const { return getpid() == pid_ ? threads_ : 0; }  // none after a fork

  // `job` on the calling thread and, when no other product holds them, the helpers.
  void Run(const std::shared_ptr<Job>& job) {
    std::unique_lock<std::mutex> lock(busy_, std::defer_lock);
    if (threads() > 0 && job->parts > 1 && lock.try_lock()) {
      std::atomic_store(&job_, job);
      generation_.fetch_add(1);
      if (sleepers_.load() > 0) {
        { std::lock_guard<std::mutex> wake(sleep_); }
        wake_.notify_all();
      }
    }
    job->Help();
    while (job->done.load() < job->parts) Pause();
    if (lock.owns_lock()) std::atomic_store(&job_, std::shared_ptr<Job>());
  }

 private:
  explicit Helpers(int64_t pool_threads) : pid_(getpid()) {
    cpu_set_t cpus;
    int64_t cores = 1;
    if (sched_getaffinity(0, sizeof(cpus), &cpus) == 0) cores = CPU_COUNT(&cpus);
    threads_ = std::max<int64_t>(0, std::min<int64_t>(cores - 1, pool_threads));
    for (int64_t t = 0; t < threads_; ++t) std::thread([this] { Loop(); }).detach();
  }

  void Loop() {
    uint64_t seen = generation_.load();
    for (;;) {
      const auto start = std::chrono::steady_clock::now();
      for (int64_t spins = 0; generation_.load() == seen; ++spins) {
        Pause();
        if (spins % 256 == 255 && std::chrono::steady_clock::now() - start >
                                      std::chrono::microseconds(kSpinMicroseconds)) {
          std::unique_lock<std::mutex> sleeping(sleep_);
          sleepers_.fetch_add(1);
          wake_.wait(sleeping, [&] { return generation_.load() != seen; });
          sleepers_.fetch_sub(1);
        }
      }
      seen = generation_.load();
      if (auto job = std::atomic_load(&job_)) job->Help();
    }
  }

  const pid_t pid_;
  int64_t threads_ = 0;
  std::mutex busy_;  // held by the product that has the helpers
  std::mutex sleep_;
  std::condition_variable wake_;
  std::atomic<uint64_t> generation_{0};
  std::atomic<int64_t> sleepers_{0};
  std::shared_ptr<Job> job_;  // std::atomic_load / std::atomic_store only
};
