-- Health of an OLM v1 ClusterCatalog (olm.operatorframework.io/v1) for Argo CD.
-- Healthy: Progressing=True/Succeeded for the current generation and Serving=True (or
--   Serving=False/UserSpecifiedUnavailable: spec.availabilityMode Unavailable, as asked).
-- Progressing: no status yet, the current generation not yet acted on, unpacking, or
--   Progressing=True/Retrying, with the condition's message.
-- Degraded: Progressing=False (Blocked: retrying cannot help until the spec changes), or
--   Serving=False for any other reason, with the condition's message.
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
local progressing = condition(conditions, "Progressing")
local serving = condition(conditions, "Serving")
if progressing == nil then
  hs.status = "Progressing"
  hs.message = "Waiting for the controller"
  return hs
end

local generation = obj.metadata.generation
if generation ~= nil and progressing.observedGeneration ~= generation then
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
  if serving ~= nil and serving.status == "True" then
    hs.status = "Healthy"
    hs.message = serving.message
    return hs
  end
  if serving ~= nil and serving.reason == "UserSpecifiedUnavailable" then
    hs.status = "Healthy"
    hs.message = serving.message
    return hs
  end
  if serving ~= nil and serving.status == "False" then
    hs.status = "Degraded"
    hs.message = serving.message
    if hs.message == nil or hs.message == "" then
      hs.message = "Not serving: " .. tostring(serving.reason)
    end
    return hs
  end
  hs.status = "Progressing"
  hs.message = "Waiting for the catalog to be served"
  return hs
end

-- Retrying or Unknown: unpacking or retrying.
hs.status = "Progressing"
hs.message = progressing.message
return hs
