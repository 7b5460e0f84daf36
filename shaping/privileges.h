#pragma once

// What a shaped GPU container may do beyond an ordinary one: hostIPC and IPC_LOCK
// (README "What the webhook does", config podSecurity), as the namespace's Pod Security
// level allows.
#include <optional>
#include <string>
#include <vector>

#include "base/result.h"
#include "shaping/admission_context.h"
#include "shaping/config.h"
#include "shaping/memlock_pod.h"
#include "shaping/pod_inputs.h"

namespace podshaper {

enum class Privileges {
  kGranted,  // hostIPC and IPC_LOCK
  kLeftOut,  // the namespace's Pod Security level forbids them and config podSecurity: warn
};

struct PodPrivileges {
  Privileges privileges = Privileges::kGranted;
  std::optional<std::string> warning;  // why they are left out
};

// hostIPC and IPC_LOCK, unless the namespace enforces Pod Security baseline or
// restricted: then left out with a warning, or an error under config podSecurity: deny.
Result<PodPrivileges> decidePrivileges(const AdmissionContext& ctx, PodSecurityAction podSecurity);

// A GPU container that runs, or may run, as a non-root user: IPC_LOCK does not
// take effect for it (Kubernetes sets no ambient capabilities), so what it may
// lock is its RLIMIT_MEMLOCK alone. Says where that limit comes from.
// `asked`: config memlock.
std::optional<std::string> nonRootMemlockWarning(const GpuContainer& c, const MemlockAnnotation& memlock,
                                                 const MemlockLimit& asked);

}  // namespace podshaper
