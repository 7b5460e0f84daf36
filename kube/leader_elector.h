#pragma once

// One leader among the replicas of a binary, through a coordination.k8s.io/v1
// Lease (what client-go's leaderelection does, with ReleaseOnCancel). The
// decisions are in lease.h; this class reads and writes the Lease on its own
// thread every retryPeriod.
//
// Guarding writes: isLeading() turns false as soon as the last successful
// renewal is renewDeadline old by this process's steady clock, whether or not
// the loop is stuck in a request. Others take over only leaseDuration after
// they last saw us renew, which is later, so a leader cut off from the API
// server stops before a new one starts. Check isLeading() right before each
// write that only the leader may make.

#include <atomic>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "kube/client.h"
#include "kube/lease.h"

namespace podshaper::kube {

class LeaderElector {
 public:
  // The config must pass validate() (std::invalid_argument otherwise: check
  // flags with validate() first). The callbacks run on the elector's thread,
  // in pairs: onStoppedLeading once after each onStartedLeading (on losing the
  // lease and on stop()). Keep them short: renewals wait while they run.
  //
  // Requests go through clients of the elector's own, with the server and
  // credentials of `client`, no resending after 429 and a timeout of at most
  // renewDeadline/4: cpprestsdk may send a request twice, each time with the
  // timeout, so one slow request takes at most renewDeadline/2 and cannot
  // outlast the renew deadline.
  LeaderElector(const Client& client, LeaseConfig config, std::function<void()> onStartedLeading,
                std::function<void()> onStoppedLeading);
  ~LeaderElector();  // stops (and releases the lease if leading)
  LeaderElector(const LeaderElector&) = delete;
  LeaderElector& operator=(const LeaderElector&) = delete;

  void start();
  // Returns within about a second, also while a read of the lease gets no
  // answer; a write already sent may hold it up to its timeout. If leading:
  // isLeading() turns false, onStoppedLeading runs, and the lease is released
  // (holderIdentity "", conditional on the resourceVersion we last wrote) so
  // that a standby takes over at its next try. (Called from a callback, it only asks.)
  void stop();

  // True only while the last renewal is younger than renewDeadline (steady clock).
  bool isLeading() const;
  // The holder last seen on the lease ("" when free, or not read yet).
  std::string holder() const;
  const LeaseConfig& config() const { return config_; }

 private:
  enum class Attempt { Leading, NotLeading, Conflict, Failed };

  void run();
  Attempt tryAcquireOrRenew();
  Attempt succeeded(LeaseRecord written, long long writeSentAtMicros);
  void reportFailure(const char* what, const ApiError& error);
  // Gives up leadership: isLeading() is false before onStoppedLeading runs.
  void stopLeading(bool voluntary, const std::string& why);
  void release();
  void setHolder(const std::string& holder);
  bool sleepUnlessStopped(long long micros);
  void callback(const std::function<void()>& f, const char* name);

  const LeaseConfig config_;
  const Client client_;         // the loop's requests
  const Client releaseClient_;  // the release on stop(): short timeout, stop() must be prompt
  const std::function<void()> onStartedLeading_;
  const std::function<void()> onStoppedLeading_;

  // Read by isLeading() from any thread. lastRenewMicros_ is the steady-clock
  // time at which the last successful write was sent: the server applied it
  // later, so others see our renewal no earlier than that.
  std::atomic<bool> leading_{false};
  std::atomic<long long> lastRenewMicros_{0};

  mutable std::mutex holderMu_;
  std::string holder_;

  // The loop's own state (its thread only).
  std::optional<LeaseObservation> observation_;
  std::optional<LeaseRecord> written_;  // our last successful write: the precondition of a release
  int failures_ = 0;                    // in a row, to log the first at warn and the rest at debug

  std::atomic<bool> stop_{false};
  std::mutex sleepMu_;
  std::condition_variable sleepCv_;
  std::thread thread_;
};

}  // namespace podshaper::kube
