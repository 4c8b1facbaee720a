-- W6: W1 revalidated: GET /v1/subjects/{random subject id} with If-None-Match
-- carrying that subject's current tag, so every answer should be 304 (no body).
-- BENCH_ETAGS names a file of "id tag" lines, one per subject, that bench.py
-- fetches just before the run (writes change tags, so they must be fresh).
local dir = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"
local c = dofile(dir .. "common.lua")
local tags
local function load_tags()
  local path = os.getenv("BENCH_ETAGS") or (c.data_dir .. "/etags.txt")
  local t = {}
  for _, line in ipairs(c.read(path, "bench.py writes it from GET /v1/subjects/{id}")) do
    local id, tag = line:match("^(%S+)%s+(.+)$")
    if not id then error(path .. ": not an \"id tag\" line: " .. line) end
    t[#t + 1] = { id, tag }
  end
  return t
end
c.install(function(i)
  tags = tags or load_tags()
  local t = c.pick(tags)
  return c.format("GET", "/v1/subjects/" .. t[1], nil, { ["If-None-Match"] = t[2] })
end, "304")
