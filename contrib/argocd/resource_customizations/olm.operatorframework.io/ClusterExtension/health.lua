-- Health of an OLM v1 ClusterExtension (olm.operatorframework.io/v1) for Argo CD.
-- Healthy: Installed=True and Progressing=True/Succeeded for the current generation.
-- Progressing: no status yet, the current generation not yet acted on, or
--   Progressing=True while resolving, rolling out (RollingOut) or retrying (Retrying).
-- Degraded: Progressing=False (Blocked, InvalidConfiguration, ProgressDeadlineExceeded:
--   retrying cannot help until something changes), with the condition's message.
-- The upgrade controls (docs/how-to/argocd.md, "Upgrade controls"), with Progressing's
-- message: Paused -> Suspended; an upgrade waiting for approval (ApprovalRequired) or
-- held by the operator (NotUpgradeable) -> Healthy while installed (Suspended while
-- nothing is installed yet); RolledBack -> Healthy when asked (rollback-to), Degraded
-- when a failed upgrade was rolled back (RolledBack=True/UpgradeFailed).
-- Uses only the libraries Argo CD opens for health checks (base, table).
local hs = {}

local function condition(conditions, type)
  for _, c in ipairs(conditions) do
    if c.type == type then
      return c
    end
  end
  return nil
end

if obj.status == nil or obj.status.conditions == nil then
  hs.status = "Progressing"
  hs.message = "Waiting for the controller"
  return hs
end

local conditions = obj.status.conditions
local installed = condition(conditions, "Installed")
local progressing = condition(conditions, "Progressing")
if installed == nil or progressing == nil then
  hs.status = "Progressing"
  hs.message = "Waiting for the controller"
  return hs
end

local generation = obj.metadata.generation
if generation ~= nil and (progressing.observedGeneration ~= generation or installed.observedGeneration ~= generation) then
  hs.status = "Progressing"
  hs.message = "Waiting for the controller to act on generation " .. tostring(generation)
  return hs
end

if progressing.status == "False" then
  hs.status = "Degraded"
  hs.message = progressing.message
  return hs
end

if progressing.status == "True" and progressing.reason == "Succeeded" then
  if installed.status == "True" then
    hs.status = "Healthy"
    hs.message = installed.message
    return hs
  end
  hs.status = "Progressing"
  hs.message = installed.message
  return hs
end

if progressing.status == "True" and progressing.reason == "Paused" then
  hs.status = "Suspended"
  hs.message = progressing.message
  return hs
end

if progressing.status == "True" and (progressing.reason == "ApprovalRequired" or progressing.reason == "NotUpgradeable") then
  if installed.status == "True" then
    hs.status = "Healthy"
  else
    hs.status = "Suspended"
  end
  hs.message = progressing.message
  return hs
end

if progressing.status == "True" and progressing.reason == "RolledBack" then
  local rolledBack = condition(conditions, "RolledBack")
  if rolledBack ~= nil and rolledBack.status == "True" and rolledBack.reason == "UpgradeFailed" then
    hs.status = "Degraded"
    hs.message = rolledBack.message
    return hs
  end
  hs.status = "Healthy"
  hs.message = progressing.message
  return hs
end

-- Retrying, RollingOut, or Unknown: still working towards the desired state.
hs.status = "Progressing"
hs.message = progressing.message
return hs
