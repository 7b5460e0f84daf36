#include "kube/leader_elector.h"

#include <algorithm>
#include <chrono>
#include <random>
#include <stdexcept>
#include <utility>

#include "cli/logging.h"

namespace podshaper::kube {

namespace {
const cli::Logger& kLog = cli::logger("lease");

using std::chrono::microseconds;
using std::chrono::milliseconds;

// The release is a courtesy (without it the standby waits out the lease), so
// stop() does not wait long for it.
constexpr milliseconds kReleaseTimeout{1000};

long long steadyMicros() {
  return std::chrono::duration_cast<microseconds>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

long long wallMicros() {
  return std::chrono::duration_cast<microseconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

long long micros(std::chrono::seconds s) { return std::chrono::duration_cast<microseconds>(s).count(); }

LeaseConfig validated(LeaseConfig config) {
  if (auto ok = validate(config); !ok) throw std::invalid_argument(ok.error().message);
  return config;
}

// A 429 resent after up to maxRetryDelay, or a request waiting out a 30 s
// timeout, would outlast the renew deadline: the loop itself is the retry.
// renewDeadline/4: cpprestsdk sends a request a second time, on a new
// connection and with a new timeout, when a pooled connection fails (its timer
// closing a connection that got no answer counts), so one request may take
// twice the timeout: renewDeadline/2 at most. (Measured with renewDeadline 3s
// and a renewDeadline/2 timeout: a lease read through a network that held
// every byte failed after 3.0 s, in the TLS handshake of a second connection,
// and the leader stepped down after the standby had taken over;
// tests/e2e/faults_e2e_test.sh.)
ClientOptions electionOptions(ClientOptions options, const LeaseConfig& config, milliseconds cap) {
  options.requestTimeout = std::min({options.requestTimeout, milliseconds(config.renewDeadline) / 4, cap});
  options.maxRetries = 0;
  options.userAgent += "/leader-election";
  return options;
}

// What each lease line is about: the lease and which candidate we are.
std::vector<cli::LogField> about(const LeaseConfig& c) {
  return {{"lease", c.ns + "/" + c.name}, {"identity", c.identity}};
}

}  // namespace

LeaderElector::LeaderElector(const Client& client, LeaseConfig config, std::function<void()> onStartedLeading,
                             std::function<void()> onStoppedLeading)
    : config_(validated(std::move(config))),
      client_(client.config(), electionOptions(client.options(), config_, milliseconds::max())),
      releaseClient_(client.config(), electionOptions(client.options(), config_, kReleaseTimeout)),
      onStartedLeading_(std::move(onStartedLeading)),
      onStoppedLeading_(std::move(onStoppedLeading)) {}

LeaderElector::~LeaderElector() {
  stop();
  // Destroyed from its own callback: the thread cannot join itself.
  if (thread_.joinable()) thread_.detach();
}

void LeaderElector::start() {
  if (thread_.joinable()) return;
  stop_ = false;
  thread_ = std::thread([this] { run(); });
}

void LeaderElector::stop() {
  {
    std::lock_guard lock(sleepMu_);
    stop_ = true;
  }
  sleepCv_.notify_all();
  if (thread_.joinable() && thread_.get_id() != std::this_thread::get_id()) thread_.join();
}

bool LeaderElector::isLeading() const {
  if (!leading_.load()) return false;
  return steadyMicros() - lastRenewMicros_.load() < micros(config_.renewDeadline);
}

std::string LeaderElector::holder() const {
  std::lock_guard lock(holderMu_);
  return holder_;
}

void LeaderElector::setHolder(const std::string& holder) {
  std::lock_guard lock(holderMu_);
  holder_ = holder;
}

bool LeaderElector::sleepUnlessStopped(long long delayMicros) {
  std::unique_lock lock(sleepMu_);
  return !sleepCv_.wait_for(lock, microseconds(std::max(0LL, delayMicros)), [this] { return stop_.load(); });
}

void LeaderElector::callback(const std::function<void()>& f, const char* name) {
  if (!f) return;
  try {
    f();
  } catch (const std::exception& e) {
    kLog.error(about(config_), "{} threw: {}", name, e.what());
  }
}

void LeaderElector::run() {
  // Up to 20% longer than retryPeriod, so that candidates started together do not keep colliding.
  std::mt19937_64 rng(std::random_device{}());
  std::uniform_int_distribution<long long> jitter(0, micros(config_.retryPeriod) / 5);
  bool retriedConflict = false;

  while (!stop_.load()) {
    // Woken at the renew deadline (the delay below): step down before the next
    // request, which may hang up to twice its timeout (cpprestsdk sends a request
    // again on a new connection when a pooled one fails), and the standby could
    // take over meanwhile.
    if (leading_.load() && !isLeading()) {
      stopLeading(false, "not renewed within renewDeadline " + std::to_string(config_.renewDeadline.count()) + "s");
    }
    const Attempt attempt = tryAcquireOrRenew();
    if (stop_.load()) break;

    if (leading_.load() && !isLeading()) {
      stopLeading(false, "not renewed within renewDeadline " + std::to_string(config_.renewDeadline.count()) + "s");
    }

    // A 409 says only that the lease changed since we read it: read it again at
    // once to learn whether it changed hands (then a leader steps down now) or
    // whether someone merely edited it (then we renew and lead on).
    if (attempt == Attempt::Conflict && !retriedConflict) {
      retriedConflict = true;
      continue;
    }
    retriedConflict = false;

    long long delay = micros(config_.retryPeriod) + jitter(rng);
    if (leading_.load()) {
      // Wake up at the deadline, so that onStoppedLeading comes on time when renewals fail.
      const long long untilDeadline = lastRenewMicros_.load() + micros(config_.renewDeadline) - steadyMicros();
      delay = std::min(delay, untilDeadline + 1000);
    }
    sleepUnlessStopped(delay);
  }

  stopLeading(true, "stopping");
  release();
}

LeaderElector::Attempt LeaderElector::tryAcquireOrRenew() {
  // A leader's attempt must end by its renew deadline, so that onStoppedLeading
  // comes then and not after the standby has taken over. An attempt fails at its
  // first request that gets no answer, which may take twice its timeout
  // (electionOptions): with less than renewDeadline/2 left, the requests get a
  // quarter of what is left each.
  std::optional<Client> bounded;
  if (leading_.load()) {
    const long long left = lastRenewMicros_.load() + micros(config_.renewDeadline) - steadyMicros();
    if (left < micros(config_.renewDeadline) / 2) {
      ClientOptions options = client_.options();
      options.requestTimeout = std::max(milliseconds(1), std::chrono::duration_cast<milliseconds>(microseconds(left / 4)));
      bounded.emplace(client_.config(), options);
    }
  }
  const Client& client = bounded ? *bounded : client_;

  // A list by name rather than a GET: list() gives up as soon as stop_ is set,
  // so stop() stays prompt while the API server does not answer.
  auto list = client.list(leasesPath(config_), "", "metadata.name=" + config_.name, &stop_);
  if (stop_.load()) return Attempt::Failed;
  if (!list) {
    reportFailure("read", list.error());
    return Attempt::Failed;
  }
  const auto items = list->find("items");
  if (items == list->end() || !items->is_array() || items->empty()) {
    const long long sentAt = steadyMicros();
    auto created = client.create(leasesPath(config_), leaseToJson(config_, newLeaseRecord(config_, wallMicros())));
    if (!created) {
      if (created.error().isConflict()) {
        kLog.debug(about(config_), "another candidate created it first");
        return Attempt::Conflict;
      }
      reportFailure("create", created.error());
      return Attempt::Failed;
    }
    return succeeded(leaseRecordFromJson(*created), sentAt);
  }

  observation_ = observeLease(observation_, leaseRecordFromJson(items->front()), steadyMicros());
  setHolder(observation_->record.holderIdentity);
  const LeaseDecision decision = decideLease(config_, *observation_, steadyMicros(), wallMicros());
  if (decision.action == LeaseAction::Wait) {
    failures_ = 0;
    if (leading_.load()) stopLeading(false, "the lease is held by " + observation_->record.holderIdentity);
    return Attempt::NotLeading;
  }

  const long long sentAt = steadyMicros();
  auto written = client.replace(leasePath(config_), leaseToJson(config_, decision.record));
  if (!written) {
    if (written.error().isConflict()) {
      kLog.debug(about(config_), "changed while we tried to {} it", toString(decision.action));
      return Attempt::Conflict;
    }
    reportFailure(decision.action == LeaseAction::Renew ? "renew" : "acquire", written.error());
    return Attempt::Failed;
  }
  if (decision.action == LeaseAction::Acquire && !observation_->record.holderIdentity.empty()) {
    kLog.info(about(config_), "took over from {}, not seen renewing for {}s", observation_->record.holderIdentity,
              (steadyMicros() - observation_->observedAtMicros) / 1000000);
  }
  return succeeded(leaseRecordFromJson(*written), sentAt);
}

LeaderElector::Attempt LeaderElector::succeeded(LeaseRecord written, long long writeSentAtMicros) {
  failures_ = 0;
  setHolder(written.holderIdentity);
  observation_ = LeaseObservation{written, steadyMicros()};
  written_ = std::move(written);
  // Before leading_: isLeading() must never pair leading_ with the last term's renewal time.
  lastRenewMicros_ = writeSentAtMicros;
  // Won just as stop() came: not worth starting to lead; run() releases it.
  if (stop_.load() && !leading_.load()) return Attempt::Leading;
  if (!leading_.exchange(true)) {
    kLog.info(about(config_), "became leader");
    callback(onStartedLeading_, "onStartedLeading");
  }
  return Attempt::Leading;
}

void LeaderElector::reportFailure(const char* what, const ApiError& error) {
  if (leading_.load()) {
    const long long left = lastRenewMicros_.load() + micros(config_.renewDeadline) - steadyMicros();
    kLog.warn(about(config_), "{} failed: {}; {} ms left to renew before stepping down", what, error.message,
              std::max(0LL, left / 1000));
  } else if (failures_++ == 0) {
    kLog.warn(about(config_), "{} failed: {}; retrying every {}s", what, error.message, config_.retryPeriod.count());
  } else {
    kLog.debug(about(config_), "{} failed again ({} in a row): {}", what, failures_, error.message);
  }
}

void LeaderElector::stopLeading(bool voluntary, const std::string& why) {
  if (!leading_.exchange(false)) return;
  if (voluntary) {
    kLog.info(about(config_), "stopped leading: {}", why);
  } else {
    kLog.warn(about(config_), "lost the lease: {}", why);
  }
  callback(onStoppedLeading_, "onStoppedLeading");
}

// Also after losing the lease by the deadline: if the API server comes back
// with the lease still ours, freeing it spares the standby the wait; if anyone
// wrote it since, the resourceVersion precondition makes this a 409.
void LeaderElector::release() {
  if (!written_ || written_->holderIdentity != config_.identity) return;
  // After onStoppedLeading: whatever the leader was doing has stopped before a standby can start.
  const LeaseRecord released = releasedLeaseRecord(*written_, wallMicros());
  auto r = releaseClient_.replace(leasePath(config_), leaseToJson(config_, released));
  if (r) {
    written_.reset();
    setHolder("");
    kLog.info(about(config_), "released");
  } else if (r.error().isConflict()) {
    kLog.info(about(config_), "not released, it changed since our last renewal");
  } else {
    kLog.warn(about(config_), "release failed: {}; a standby takes over when the lease expires", r.error().message);
  }
}

}  // namespace podshaper::kube
