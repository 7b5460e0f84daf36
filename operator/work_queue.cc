#include "operator/work_queue.h"

#include <algorithm>

namespace podshaper::op {

WorkQueue::WorkQueue(std::chrono::milliseconds baseDelay, std::chrono::milliseconds maxDelay, Now now)
    : baseDelay_(baseDelay), maxDelay_(maxDelay), now_(now ? std::move(now) : Now([] { return Clock::now(); })) {}

void WorkQueue::queueLocked(const std::string& key) {
  if (shutDown_ || !dirty_.insert(key).second) return;
  if (!processing_.contains(key)) {
    queue_.push_back(key);
    cv_.notify_one();
  }
}

void WorkQueue::unwaitLocked(const std::string& key) {
  auto it = waiting_.find(key);
  if (it == waiting_.end()) return;
  byTime_.erase({it->second, key});
  waiting_.erase(it);
}

void WorkQueue::add(const std::string& key) {
  std::lock_guard lock(mu_);
  unwaitLocked(key);
  queueLocked(key);
}

void WorkQueue::addAfter(const std::string& key, Clock::duration delay) {
  if (delay <= Clock::duration::zero()) return add(key);
  std::lock_guard lock(mu_);
  if (shutDown_ || dirty_.contains(key)) return;
  const auto at = now_() + delay;
  auto [it, inserted] = waiting_.emplace(key, at);
  if (!inserted) {
    if (it->second <= at) return;
    byTime_.erase({it->second, key});
    it->second = at;
  }
  byTime_.emplace(at, key);
  cv_.notify_all();  // the soonest wait may have moved earlier
}

void WorkQueue::retry(const std::string& key) {
  std::chrono::milliseconds delay;
  {
    std::lock_guard lock(mu_);
    const int n = std::min(failures_[key]++, 20);
    delay = std::min<std::chrono::milliseconds>(maxDelay_, baseDelay_ * (1L << n));
  }
  addAfter(key, delay);
}

void WorkQueue::forget(const std::string& key) {
  std::lock_guard lock(mu_);
  failures_.erase(key);
}

void WorkQueue::promoteDueLocked(Clock::time_point now) {
  while (!byTime_.empty() && byTime_.begin()->first <= now) {
    std::string key = byTime_.begin()->second;
    byTime_.erase(byTime_.begin());
    waiting_.erase(key);
    queueLocked(key);
  }
}

std::optional<std::string> WorkQueue::popDueLocked() {
  promoteDueLocked(now_());
  if (queue_.empty()) return std::nullopt;
  std::string key = std::move(queue_.front());
  queue_.pop_front();
  dirty_.erase(key);
  processing_.insert(key);
  return key;
}

std::optional<std::string> WorkQueue::tryGet() {
  std::lock_guard lock(mu_);
  if (shutDown_) return std::nullopt;
  return popDueLocked();
}

std::optional<std::string> WorkQueue::get() {
  std::unique_lock lock(mu_);
  while (true) {
    if (shutDown_) return std::nullopt;
    if (auto key = popDueLocked()) return key;
    if (byTime_.empty()) {
      cv_.wait(lock);
    } else {
      // A copy: wait_until reads its deadline again after the wait, and while this worker
      // waits another one may promote the key and free its entry.
      const Clock::time_point until = byTime_.begin()->first;
      cv_.wait_until(lock, until);
    }
  }
}

void WorkQueue::done(const std::string& key) {
  std::lock_guard lock(mu_);
  processing_.erase(key);
  if (dirty_.contains(key)) {
    queue_.push_back(key);
    cv_.notify_one();
  }
}

void WorkQueue::shutDown() {
  std::lock_guard lock(mu_);
  shutDown_ = true;
  cv_.notify_all();
}

std::size_t WorkQueue::depth() const {
  std::lock_guard lock(mu_);
  return queue_.size();
}

std::size_t WorkQueue::waiting() const {
  std::lock_guard lock(mu_);
  return waiting_.size();
}

}  // namespace podshaper::op
