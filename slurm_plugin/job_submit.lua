-- job_submit.lua: hpcpredict's submission hook for Slurm (JobSubmitPlugins=lua, Lua 5.1).
--
-- Installed next to slurm.conf. For every batch job it sends the job description (raw script,
-- argv, resources, time limit, identity) to hpcpredictd's hook socket as one JSON line, reads
-- one JSON line back (an Estimate) and applies the site policy:
--   * the user gave --time: keep it as the kill limit, set time_min to the prediction
--     (backfill can start the job earlier; no job is killed sooner than asked);
--   * no --time: set time_limit from the predicted upper bound at the site's risk target;
--   * one line to the user (slurm.log_user -> sbatch's stderr), the prediction id in
--     admin_comment and in the job environment (HPCPREDICT_PREDICTION_ID).
-- It FAILS OPEN: no daemon, a slow or hung daemon, garbage, missing fields -> the job is
-- accepted exactly as submitted, and the controller log says why. The whole exchange has a
-- hard budget (BUDGET_S) because slurmctld holds its job write lock while this runs.
--
-- Settings below may be overridden, one "key = value" per line, in hpcpredict-hooks.conf
-- in the hpcpredict/ folder next to this file, then in a copy next to this file (read when
-- slurmctld (re)loads the script, i.e. when this file's mtime changes: `touch` it after
-- editing the settings). Needs lua-socket (Debian: lua-socket) for socket.unix.

local CONFIG = {
  hook_socket = "/run/hpcpredict/hook.sock",  -- the daemon's [daemon] hook_socket
  budget_s = 0.3,               -- hard limit for connect + send + receive, seconds
  risk = 0,                     -- 0 = the daemon's site risk target; else e.g. 0.05
  set_time_min = true,          -- policy when the user gave --time
  set_time_limit = true,        -- policy when the user gave no --time
  max_script_bytes = 1048576,   -- larger scripts are sent without their text
  env_vars = "OMP_NUM_THREADS,HPCPREDICT_APP,HPCPREDICT_INPUTS",  -- job env sent along
  enabled = true,
}

local NO_VAL, NO_VAL16 = 4294967294, 65534
if slurm ~= nil then NO_VAL, NO_VAL16 = slurm.NO_VAL or NO_VAL, slurm.NO_VAL16 or NO_VAL16 end
local INFINITE = 4294967295

-- ------------------------------------------------------------------ config file
local function this_dir()
  local source = debug.getinfo(1, "S").source or ""
  return source:match("^@(.*/)[^/]*$") or "./"
end

local function load_config(path)
  local f = io.open(path, "r")
  if f == nil then return end
  for line in f:lines() do
    local key, value = line:match("^%s*([%w_]+)%s*=%s*(.-)%s*$")
    if key ~= nil and CONFIG[key] ~= nil and not line:match("^%s*#") then
      local kind = type(CONFIG[key])
      if kind == "number" then CONFIG[key] = tonumber(value) or CONFIG[key]
      elseif kind == "boolean" then CONFIG[key] = (value == "true" or value == "1" or value == "yes")
      else CONFIG[key] = value end
    end
  end
  f:close()
end
-- next to this file, or in the hpcpredict/ folder beside it (where the prolog scripts live)
load_config(this_dir() .. "hpcpredict/hpcpredict-hooks.conf")
load_config(this_dir() .. "hpcpredict-hooks.conf")

-- ------------------------------------------------------------------ JSON (small, strict)
local json = {}

local ESCAPES = { ['"'] = '\\"', ['\\'] = '\\\\', ['\b'] = '\\b', ['\f'] = '\\f',
                  ['\n'] = '\\n', ['\r'] = '\\r', ['\t'] = '\\t' }

-- Replace every byte that is not part of a valid UTF-8 sequence by U+FFFD, so the daemon
-- (which parses strict UTF-8) never rejects a job because of a stray Latin-1 byte.
local function utf8_clean(s)
  if not s:find("[\128-\255]") then return s end
  local out, i, n = {}, 1, #s
  while i <= n do
    local c = s:byte(i)
    local len = (c < 0x80 and 1) or (c >= 0xC2 and c <= 0xDF and 2) or (c >= 0xE0 and c <= 0xEF and 3)
                or (c >= 0xF0 and c <= 0xF4 and 4) or 0
    local ok = len > 0 and i + len - 1 <= n
    if ok then
      for k = i + 1, i + len - 1 do
        local b = s:byte(k)
        if b < 0x80 or b > 0xBF then ok = false; break end
      end
    end
    if ok and len == 3 then   -- no overlongs, no surrogates
      local b = s:byte(i + 1)
      if (c == 0xE0 and b < 0xA0) or (c == 0xED and b > 0x9F) then ok = false end
    elseif ok and len == 4 then
      local b = s:byte(i + 1)
      if (c == 0xF0 and b < 0x90) or (c == 0xF4 and b > 0x8F) then ok = false end
    end
    if ok then out[#out + 1] = s:sub(i, i + len - 1); i = i + len
    else out[#out + 1] = "\239\191\189"; i = i + 1 end
  end
  return table.concat(out)
end

local function encode_string(s)
  s = utf8_clean(s)
  return '"' .. s:gsub('[%c"\\]', function(ch)
    return ESCAPES[ch] or string.format("\\u%04x", ch:byte())
  end) .. '"'
end

-- Tables with a field `__array` (or empty tables marked so) encode as arrays.
function json.encode(v)
  local kind = type(v)
  if kind == "string" then return encode_string(v)
  elseif kind == "number" then
    if v ~= v or v == math.huge or v == -math.huge then error("json: number is not finite") end
    if v == math.floor(v) and math.abs(v) < 2^53 then return string.format("%d", v) end
    return string.format("%.17g", v)
  elseif kind == "boolean" then return tostring(v)
  elseif kind == "nil" then return "null"
  elseif kind == "table" then
    local parts = {}
    if v.__array then
      for i = 1, #v do parts[#parts + 1] = json.encode(v[i]) end
      return "[" .. table.concat(parts, ",") .. "]"
    end
    local keys = {}
    for k in pairs(v) do keys[#keys + 1] = tostring(k) end
    table.sort(keys)
    for _, k in ipairs(keys) do parts[#parts + 1] = encode_string(k) .. ":" .. json.encode(v[k]) end
    return "{" .. table.concat(parts, ",") .. "}"
  end
  error("json: cannot encode " .. kind)
end

local function utf8_char(cp)
  if cp < 0x80 then return string.char(cp) end
  if cp < 0x800 then return string.char(0xC0 + math.floor(cp / 64), 0x80 + cp % 64) end
  if cp < 0x10000 then
    return string.char(0xE0 + math.floor(cp / 4096), 0x80 + math.floor(cp / 64) % 64, 0x80 + cp % 64)
  end
  return string.char(0xF0 + math.floor(cp / 262144), 0x80 + math.floor(cp / 4096) % 64,
                     0x80 + math.floor(cp / 64) % 64, 0x80 + cp % 64)
end

function json.decode(text)
  local pos = 1
  local function fail(what) error(string.format("json: %s at byte %d", what, pos), 0) end
  local function skip() pos = text:find("[^ \t\r\n]", pos) or (#text + 1) end
  local value
  local function str()
    pos = pos + 1
    local out = {}
    while true do
      local a, b = text:find('^[^"\\%c]+', pos)
      if a then out[#out + 1] = text:sub(a, b); pos = b + 1 end
      local ch = text:sub(pos, pos)
      if ch == '"' then pos = pos + 1; return table.concat(out)
      elseif ch == "\\" then
        local e = text:sub(pos + 1, pos + 1)
        local simple = ({ ['"'] = '"', ["\\"] = "\\", ["/"] = "/", b = "\b", f = "\f", n = "\n", r = "\r", t = "\t" })[e]
        if simple then out[#out + 1] = simple; pos = pos + 2
        elseif e == "u" then
          local hex = text:match("^%x%x%x%x", pos + 2) or fail("bad \\u escape")
          local cp = tonumber(hex, 16); pos = pos + 6
          if cp >= 0xD800 and cp <= 0xDBFF then
            local low = text:match("^\\u(%x%x%x%x)", pos)
            local lo = low and tonumber(low, 16)
            if lo and lo >= 0xDC00 and lo <= 0xDFFF then
              cp = 0x10000 + (cp - 0xD800) * 1024 + (lo - 0xDC00); pos = pos + 6
            else cp = 0xFFFD end
          elseif cp >= 0xDC00 and cp <= 0xDFFF then cp = 0xFFFD end
          out[#out + 1] = utf8_char(cp)
        else fail("bad escape") end
      else fail("unterminated string") end
    end
  end
  local depth = 0
  function value()
    skip()
    local ch = text:sub(pos, pos)
    if ch == "{" or ch == "[" then
      depth = depth + 1
      if depth > 32 then fail("nested too deep") end
      local close, result, first = (ch == "{") and "}" or "]", {}, true
      if ch == "[" then result.__array = true end
      pos = pos + 1
      while true do
        skip()
        if text:sub(pos, pos) == close then pos = pos + 1; break end
        if not first then
          if text:sub(pos, pos) ~= "," then fail("expected ','") end
          pos = pos + 1; skip()
        end
        first = false
        if close == "}" then
          if text:sub(pos, pos) ~= '"' then fail("expected a key") end
          local key = str(); skip()
          if text:sub(pos, pos) ~= ":" then fail("expected ':'") end
          pos = pos + 1
          result[key] = value()
        else
          result[#result + 1] = value()
        end
      end
      depth = depth - 1
      return result
    elseif ch == '"' then return str()
    elseif text:find("^true", pos) then pos = pos + 4; return true
    elseif text:find("^false", pos) then pos = pos + 5; return false
    elseif text:find("^null", pos) then pos = pos + 4; return nil
    end
    local num = text:match("^-?%d+%.?%d*[eE]?[-+]?%d*", pos)
    if num == nil or num == "" or tonumber(num) == nil then fail("unexpected character") end
    pos = pos + #num
    return tonumber(num)
  end
  local result = value()
  skip()
  if pos <= #text then fail("trailing characters") end
  return result
end

-- ------------------------------------------------------------------ base64 (bytes fields)
local B64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
local function base64(s)
  local out, n = {}, #s
  for i = 1, n, 3 do
    local a, b, c = s:byte(i, i + 2)
    local v = a * 65536 + (b or 0) * 256 + (c or 0)
    local c1, c2 = math.floor(v / 262144) % 64 + 1, math.floor(v / 4096) % 64 + 1
    local c3, c4 = math.floor(v / 64) % 64 + 1, v % 64 + 1
    out[#out + 1] = B64:sub(c1, c1) .. B64:sub(c2, c2) ..
                    (b and B64:sub(c3, c3) or "=") .. (c and B64:sub(c4, c4) or "=")
  end
  return table.concat(out)
end

-- ------------------------------------------------------------------ job description -> request
local function isset(v)
  return v ~= nil and v ~= NO_VAL and v ~= NO_VAL16 and v ~= INFINITE
end

local function num(v) if isset(v) then return v end return 0 end

local function distribution(task_dist)
  if not isset(task_dist) then return "" end
  return ({ [1] = "cyclic", [2] = "block", [3] = "arbitrary", [4] = "plane" })[task_dist % 16] or ""
end

local function build_request(job_desc)
  local argv = { __array = true }
  if job_desc.argv ~= nil then
    local i = 1                                    -- argv[0] is the script path
    while job_desc.argv[i] ~= nil and i < 1000 do argv[#argv + 1] = tostring(job_desc.argv[i]); i = i + 1 end
  end
  local environment = {}
  local env = job_desc.environment
  if env ~= nil then
    for name in CONFIG.env_vars:gmatch("[^,%s]+") do
      local v = env[name]
      if v ~= nil then environment[name] = tostring(v) end
    end
  end
  local script = job_desc.script or ""
  if #script > CONFIG.max_script_bytes then
    slurm.log_info("hpcpredict: script of %d bytes not sent (limit %d)", #script, CONFIG.max_script_bytes)
    script = ""
  end
  local limit = job_desc.time_limit
  local request = {
    job = {
      user = tostring(job_desc.user_name or ""),
      account = tostring(job_desc.account or ""),
      partition = tostring(job_desc.partition or ""),
      job_name = tostring(job_desc.name or ""),
      qos = tostring(job_desc.qos or ""),
    },
    resources = {
      nodes = num(job_desc.min_nodes),
      ntasks = num(job_desc.num_tasks),
      ntasks_per_node = num(job_desc.ntasks_per_node),
      cpus_per_task = num(job_desc.cpus_per_task),
      distribution = distribution(job_desc.task_dist),
    },
    time_limit_s = isset(limit) and limit * 60 or 0,
    script = base64(script),
    argv = argv,
    environment = environment,
    submit_time = os.time(),
  }
  if CONFIG.risk > 0 then request.risk = CONFIG.risk end
  return request
end

-- ------------------------------------------------------------------ the call
local socket_ok, socket = pcall(require, "socket")
local unix_ok, unix = pcall(require, "socket.unix")

-- Send one line, read one line, all inside CONFIG.budget_s. Returns the decoded reply or
-- nil and the reason.
local function call(method, request)
  if not (socket_ok and unix_ok) then return nil, "lua-socket (socket.unix) is not installed" end
  local line = json.encode({ method = method, request = request }) .. "\n"
  local deadline = socket.gettime() + CONFIG.budget_s
  local function left() return deadline - socket.gettime() end
  local conn = unix.stream and unix.stream() or unix()
  if conn == nil then return nil, "cannot create a socket" end
  conn:settimeout(CONFIG.budget_s)
  local ok, err = conn:connect(CONFIG.hook_socket)
  if not ok then conn:close(); return nil, "connect " .. CONFIG.hook_socket .. ": " .. tostring(err) end
  local sent = 0
  while sent < #line do
    if left() <= 0 then conn:close(); return nil, "timeout while sending" end
    conn:settimeout(left())
    local last, serr, partial = conn:send(line, sent + 1)
    if last == nil then
      if serr ~= "timeout" then conn:close(); return nil, "send: " .. tostring(serr) end
      sent = partial or sent
    else sent = last end
  end
  local chunks = {}
  while true do
    if left() <= 0 then conn:close(); return nil, string.format("no answer within %.0f ms", CONFIG.budget_s * 1000) end
    conn:settimeout(left())
    local reply, rerr, partial = conn:receive("*l")
    if reply ~= nil then chunks[#chunks + 1] = reply; break end
    if partial ~= nil and partial ~= "" then chunks[#chunks + 1] = partial end
    if rerr ~= "timeout" then conn:close(); return nil, "receive: " .. tostring(rerr) end
  end
  conn:close()
  local decoded_ok, reply = pcall(json.decode, table.concat(chunks))
  if not decoded_ok then return nil, "bad reply: " .. tostring(reply) end
  if type(reply) ~= "table" then return nil, "bad reply: not an object" end
  if reply.ok ~= true then return nil, "daemon refused: " .. tostring(reply.error) end
  if type(reply.response) ~= "table" then return nil, "bad reply: no response object" end
  return reply.response
end

-- ------------------------------------------------------------------ policy
local function minutes(seconds) return math.ceil(seconds / 60) end

local function human(seconds)
  seconds = math.floor(seconds + 0.5)
  if seconds < 90 then return string.format("%d s", seconds) end
  if seconds < 600 then return string.format("%d min %02d s", math.floor(seconds / 60), seconds % 60) end
  if seconds < 5400 then return string.format("%d min", math.floor(seconds / 60 + 0.5)) end
  return string.format("%.1f h", seconds / 3600)
end

-- Checks the estimate and returns the changes to make; nil + reason when it is unusable.
local function plan(estimate, requested_min, user_time_min)
  local runtime = tonumber(estimate.runtime_s)
  local interval_t = type(estimate.interval) == "table" and estimate.interval or {}
  local low, high = tonumber(interval_t.low_s) or 0, tonumber(interval_t.high_s) or 0
  local bound = tonumber(estimate.suggested_time_limit_s) or high
  local id = estimate.prediction_id
  if runtime == nil or runtime <= 0 or runtime ~= runtime or runtime > 1e9 then
    return nil, "estimate has no usable runtime_s"
  end
  if bound == nil or bound < runtime or bound > 1e9 then bound = math.max(high, runtime) end
  if type(id) ~= "string" and type(id) ~= "number" then id = "" end
  id = tostring(id):gsub("[^%w%-_.:]", "")
  local changes = { id = id }
  local interval = ""
  if high > low and low > 0 then
    local coverage = tonumber(interval_t.coverage) or 0
    interval = string.format(" (%s - %s, %s)", human(low), human(high),
      coverage > 0 and string.format("%d%% interval", math.floor(coverage * 100 + 0.5)) or "range of recent runs")
  end
  local said = "predicted runtime " .. human(runtime) .. interval
  if requested_min ~= nil and estimate.fallback == true then
    -- no history: the "prediction" is the request itself, so there is nothing to tell backfill
    said = said .. string.format("; kept your --time=%d min", requested_min)
  elseif requested_min ~= nil and user_time_min then
    said = said .. string.format("; kept your --time=%d min and --time-min", requested_min)
  elseif requested_min ~= nil then
    local time_min = math.min(minutes(tonumber(estimate.suggested_time_min_s) or runtime), requested_min)
    if CONFIG.set_time_min and time_min >= 1 then
      changes.time_min = time_min
      said = said .. string.format("; kept your --time=%d min, set --time-min=%d min", requested_min, time_min)
    else
      said = said .. string.format("; kept your --time=%d min", requested_min)
    end
  else
    local limit = math.max(1, minutes(bound))
    if CONFIG.set_time_limit then
      changes.time_limit = limit
      said = said .. string.format("; no --time given, set --time=%d min", limit)
    else
      said = said .. string.format("; suggested --time=%d min", limit)
    end
  end
  if estimate.fallback == true then said = said .. " [no history yet]" end
  changes.message = "hpcpredict: " .. said .. (id ~= "" and (" [" .. id .. "]") or "")
  return changes
end

local function submit(job_desc)
  if not CONFIG.enabled then return end
  if job_desc.script == nil then return end  -- salloc/srun allocations: nothing to parse
  local started = socket_ok and socket.gettime() or os.time()
  local requested = isset(job_desc.time_limit) and job_desc.time_limit or nil
  local ok, request = pcall(build_request, job_desc)
  if not ok then
    slurm.log_error("hpcpredict: fail-open, job of %s accepted unchanged: cannot build request: %s",
                    tostring(job_desc.user_name), tostring(request))
    return
  end
  local estimate, why = call("Predict", request)
  local changes
  if estimate ~= nil then changes, why = plan(estimate, requested, isset(job_desc.time_min) and job_desc.time_min > 0) end
  local took_ms = ((socket_ok and socket.gettime() or os.time()) - started) * 1000
  if changes == nil then
    slurm.log_error("hpcpredict: fail-open, job of %s accepted unchanged (%.0f ms): %s",
                    tostring(job_desc.user_name), took_ms, tostring(why))
    return
  end
  -- Every check passed: only now is the job touched.
  if changes.time_min then job_desc.time_min = changes.time_min end
  if changes.time_limit then job_desc.time_limit = changes.time_limit end
  if changes.id ~= "" then
    -- ";limit=auto" tells the prolog scripts the time limit is ours, not the user's
    job_desc.admin_comment = "hpcpredict=" .. changes.id .. (changes.time_limit and ";limit=auto" or "")
    if job_desc.environment ~= nil then job_desc.environment.HPCPREDICT_PREDICTION_ID = changes.id end
  end
  slurm.log_user("%s", changes.message)
  slurm.log_info("%s (user %s, %.0f ms)", changes.message, tostring(job_desc.user_name), took_ms)
end

function slurm_job_submit(job_desc, part_list, submit_uid)
  local ok, err = pcall(submit, job_desc)
  if not ok then
    slurm.log_error("hpcpredict: fail-open, job accepted unchanged: %s", tostring(err))
  end
  return slurm.SUCCESS
end

function slurm_job_modify(job_desc, job_rec, part_list, modify_uid)
  return slurm.SUCCESS
end

-- For tests (lua5.1 outside slurmctld): expose the pure parts.
HPCPREDICT = { json = json, base64 = base64, utf8_clean = utf8_clean, plan = plan,
               build_request = build_request, call = call, config = CONFIG }

return slurm and slurm.SUCCESS or 0
