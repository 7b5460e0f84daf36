#pragma once

// The reconciler's queue of keys (client-go's workqueue, reduced to what a
// level-based reconciler needs): a key is queued at most once however often
// it is added; a key being reconciled is not handed out again until done(),
// and an add meanwhile queues it once more; keys can wait (addAfter) and
// failures back off per key.

#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <utility>

namespace podshaper::op {

class WorkQueue {
 public:
  using Clock = std::chrono::steady_clock;
  // What "now" is for addAfter and retry; unset: Clock::now. A test's own clock is read by
  // tryGet only (get() waits on the real one).
  using Now = std::function<Clock::time_point()>;

  explicit WorkQueue(std::chrono::milliseconds baseDelay = std::chrono::milliseconds(50),
                     std::chrono::milliseconds maxDelay = std::chrono::seconds(60), Now now = {});

  void add(const std::string& key);
  // Queues the key after `delay`; an earlier pending time for it wins.
  void addAfter(const std::string& key, Clock::duration delay);
  // After a failure: 50 ms, 100 ms, 200 ms ... up to maxDelay, per key.
  void retry(const std::string& key);
  // After a success: the key's next failure starts from baseDelay again.
  void forget(const std::string& key);

  // The next due key; blocks until there is one. nullopt once shut down.
  std::optional<std::string> get();
  // The next due key without waiting: nullopt when none is due now (a test's worker).
  std::optional<std::string> tryGet();
  void done(const std::string& key);
  void shutDown();

  std::size_t depth() const;    // keys queued now (not waiting, not being reconciled)
  std::size_t waiting() const;  // keys waiting for their time

 private:
  void queueLocked(const std::string& key);
  void promoteDueLocked(Clock::time_point now);
  void unwaitLocked(const std::string& key);
  std::optional<std::string> popDueLocked();

  const std::chrono::milliseconds baseDelay_, maxDelay_;
  const Now now_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::string> queue_;
  std::set<std::string> dirty_;       // queued, or to queue again when its reconcile is done
  std::set<std::string> processing_;  // handed out by get(), not done() yet
  // Keys waiting for their time, and the same by time: each get() promotes the due ones
  // from the front (12,500 reports each waiting to go stale must not be scanned per get).
  std::map<std::string, Clock::time_point> waiting_;
  std::set<std::pair<Clock::time_point, std::string>> byTime_;
  std::map<std::string, int> failures_;
  bool shutDown_ = false;
};

}  // namespace podshaper::op
