#include "shaping/privileges.h"

#include "api/names.h"

namespace podshaper {
namespace {

std::string podSecurityLevel(const AdmissionContext& ctx) {
  if (ctx.cluster == nullptr) return {};
  auto ns = ctx.cluster->namespaceLabels.find(ctx.namespaceName);
  if (ns == ctx.cluster->namespaceLabels.end()) return {};
  auto level = ns->second.find(std::string(names::kPodSecurityEnforce));
  return level == ns->second.end() ? std::string() : level->second;
}

}  // namespace

Result<PodPrivileges> decidePrivileges(const AdmissionContext& ctx, PodSecurityAction podSecurity) {
  std::string level = podSecurityLevel(ctx);
  if (level != "baseline" && level != "restricted") return PodPrivileges{};
  std::string why = "namespace \"" + ctx.namespaceName + "\" enforces Pod Security level \"" + level +
                    "\", which forbids hostIPC and the IPC_LOCK capability";
  if (podSecurity == PodSecurityAction::kDeny) {
    return makeError(why + ": label the namespace " + std::string(names::kPodSecurityEnforce) +
                     "=privileged, or ask the admin for config podSecurity: warn");
  }
  return PodPrivileges{Privileges::kLeftOut, why + ": hostIPC and IPC_LOCK left out (config podSecurity: warn)"};
}

std::optional<std::string> nonRootMemlockWarning(const GpuContainer& c, const MemlockAnnotation& memlock,
                                                 const MemlockLimit& asked) {
  std::string who;
  if (c.runAsUser) {
    if (*c.runAsUser == 0) return std::nullopt;
    who = "runs as user " + std::to_string(*c.runAsUser);
  } else if (c.runAsNonRoot) {
    who = "sets runAsNonRoot without runAsUser, so it may run as a non-root user";
  } else {
    return std::nullopt;
  }
  std::string limit;
  if (memlock.set) {
    limit = "RLIMIT_MEMLOCK from the NRI annotation " + memlock.set->first + " (" + asked.words() +
            "), which the node must grant (node label " + std::string(names::kMemlock) + ")";
  } else if (!memlock.warning) {
    limit = "RLIMIT_MEMLOCK from the pod's own ulimit annotation, which the node must grant";
  } else {
    limit = "the RLIMIT_MEMLOCK of the node's container runtime (no NRI annotation)";
  }
  const bool may = !c.runAsUser;
  return "container \"" + c.name + "\" " + who + ": IPC_LOCK is not effective for a non-root process, so the memory " +
         "it can lock " + (may ? "may rest" : "rests") + " on " + limit;
}

}  // namespace podshaper
