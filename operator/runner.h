#pragma once

// One controller, as controller-runtime runs one: a WorkQueue of keys, its workers, and a
// reconcile of one key. What the reconcile answers is done to the queue here, once for
// every controller: Done forgets the key's failures (and looks again after requeueAfter),
// NotLeader forgets it (the new leader queues everything), Retry backs off. Each
// controller's reconciles, their time and its queue are metrics labelled by its name.

#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "metrics/metrics.h"
#include "operator/reconciler.h"
#include "operator/work_queue.h"

namespace podshaper::op {

struct RunnerOptions {
  std::string name;        // the metrics' controller label: "report", "pod", "policy-status"
  WorkQueue::Now now = {};  // the queue's clock; unset: the steady clock (tests move their own)
};

class Runner {
 public:
  using Reconcile = std::function<Reconciler::Result(const std::string& key)>;

  Runner(RunnerOptions options, metrics::Registry& metrics, Reconcile reconcile);
  ~Runner();  // stops
  Runner(const Runner&) = delete;
  Runner& operator=(const Runner&) = delete;

  void add(const std::string& key) { queue_.add(key); }
  void addAfter(const std::string& key, WorkQueue::Clock::duration delay) { queue_.addAfter(key, delay); }
  WorkQueue::Clock::time_point now() const { return options_.now ? options_.now() : WorkQueue::Clock::now(); }

  void start(int workers);
  // Shuts the queue down and joins the workers; a reconcile in flight ends first.
  void stop();

  // For tests, in place of the workers: one due key reconciled on the calling thread
  // (false when none is due), or every due one (how many).
  bool processOne();
  int drain();

  const std::string& name() const { return options_.name; }
  std::size_t depth() const { return queue_.depth(); }
  std::size_t waiting() const { return queue_.waiting(); }

 private:
  void process(const std::string& key);

  const RunnerOptions options_;
  const Reconcile reconcile_;
  WorkQueue queue_;
  std::vector<std::thread> workers_;
  metrics::Counter &ok_, &error_, &notLeader_;
  metrics::Gauge& depth_;
  metrics::Histogram& duration_;
};

}  // namespace podshaper::op
