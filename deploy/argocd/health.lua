-- Argo CD health check for karpenter-health.io/KarpenterHealth: the object's Ready condition, as
-- the operator writes it (docs/checks.md, "The summary: Ready").
--   Ready=True                                  -> Healthy
--   Ready=False                                 -> Degraded (a check proved a problem)
--   Ready=Unknown, no status yet, or a status
--   written for an older generation of the object -> Progressing (not evaluated, or a check
--                                                   could not see: the message says which)
-- Install: resource.customizations.health.karpenter-health.io_KarpenterHealth in argocd-cm
-- (deploy/argocd/argocd-cm.yaml).
local hs = {}
hs.status = "Progressing"
hs.message = "Waiting for the first evaluation"
if obj.status == nil or obj.status.conditions == nil then
  return hs
end
local generation = obj.metadata and obj.metadata.generation
local observed = obj.status.observedGeneration
if generation ~= nil and observed ~= nil and observed < generation then
  hs.message = "The status predates generation " .. tostring(generation) .. " of the object"
  return hs
end
for _, condition in ipairs(obj.status.conditions) do
  if condition.type == "Ready" then
    local message = condition.message or ""
    if condition.status == "True" then
      hs.status = "Healthy"
    elseif condition.status == "False" then
      hs.status = "Degraded"
    else
      hs.status = "Progressing"
    end
    if message == "" then
      message = condition.reason or ""
    end
    hs.message = message
    return hs
  end
end
return hs
