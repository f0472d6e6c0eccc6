-- job_submit.lua: hpcpredict's submission hook for Slurm (JobSubmitPlugins=lua, Lua 5.1).
--
-- Installed next to slurm.conf. For every batch job it sends the job description (the start of
-- the script, argv, resources, time limit and --time-min, the partition's MaxTime and
-- DefaultTime, identity) to hpcpredictd's local socket as one JSON line, reads one JSON line back
-- (an Estimate) and applies the limits the daemon decided (daemon/policy/, in the
-- daemon's [policy] mode: soft, bound or advise). This file decides nothing; it only guards:
--   * a limit is set only when it is finite, a whole number of minutes, not above the site cap,
--     the partition's MaxTime or the QOS's MaxWall, a --time-min only below the job's --time
--     and never over the user's own --time-min, a --time only when the user gave none;
--   * in `bound` mode (--time-min is a kill limit: backfill may lower --time to it and enforces
--     it) never below the site floor;
--   * in `soft` mode only when this slurm.conf's SchedulerParameters contain
--     time_min_as_soft_limit AND the controller's release has the option (23.11.0+: 22.05 and
--     23.02 accept the word silently and keep --time-min a kill limit), both read when the
--     script is loaded (the release from the running slurmctld's own `-V`, which reads no
--     slurm.conf: the `slurm` table of the job_submit/lua plugin names no release, on 22.05.8 as
--     on 24.11.5, and `scontrol --version` needs a configuration): otherwise a --time-min
--     set to an estimate would kill about every other backfilled job, so the hook refuses and
--     says why in the controller log (at load and per job), whatever the daemon says;
--   * an estimate that is not sane (not finite, <= 0, above the site cap) changes nothing, and
--     the controller log says why;
--   * one line to the user (slurm.log_user -> sbatch's stderr, the daemon's text); our tagged
--     field "{hpcpredict=<id>...}" inside AdminComment (what others put there is kept) and the
--     id in the job environment (HPCPREDICT_PREDICTION_ID).
-- It FAILS OPEN: no daemon, a slow or hung daemon, garbage, missing fields -> the job is
-- accepted exactly as submitted. Its cost is bounded because slurmctld holds its job write lock
-- while this runs: the budget clock starts when slurm_job_submit is entered, at most
-- max_script_bytes of the script are sent, and after breaker_failures consecutive failures the
-- hook stops calling for breaker_cooldown_s (jobs are accepted unchanged at once meanwhile).
--
-- Settings below may be overridden, one "key = value" per line, in hpcpredict-hooks.conf
-- in the hpcpredict/ folder next to this file, then in a copy next to this file (read when
-- slurmctld (re)loads the script, i.e. when this file's mtime changes: `touch` it after
-- editing the settings). Needs lua-socket (socket.unix, mime) and lua-cjson (Debian packages).

local CONFIG = {
  hook_socket = "/run/hpcpredict/hook.sock",  -- the daemon's [daemon] hook_socket
  budget_s = 0.3,               -- hard limit from entering slurm_job_submit to the answer, seconds
  risk = 0,                     -- 0 = the daemon's site risk target; else e.g. 0.05
  min_time_limit_s = 300,       -- bound mode: the floor of every limit we set (= the daemon's [policy] min_time_limit_s)
  max_time_limit_s = 31622400,  -- site cap (366 days): no limit above it; estimates above it are ignored
  qos_max_wall_s = "",          -- "normal=172800,long=604800": QOS MaxWall in seconds (not visible from Lua)
  max_script_bytes = 65536,     -- the script is cut to this many bytes (the request says the full size)
  breaker_failures = 3,         -- consecutive failures that open the circuit breaker (0 = never)
  breaker_cooldown_s = 30,      -- how long the open breaker skips the daemon
  env_vars = "OMP_NUM_THREADS,HPCPREDICT_APP,HPCPREDICT_INPUTS",  -- job env sent along
  slurm_conf = "",              -- the slurm.conf whose SchedulerParameters decide soft mode ("" = the one next to this file)
  slurmctld = "",               -- the slurmctld whose -V names the controller's release ("" = the one running this hook)
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

-- Whether slurmctld treats --time-min as a soft limit: SchedulerParameters in slurm.conf
-- (keys are case-insensitive; the last line wins, as in Slurm). Returns ok, why-not.
local function soft_limit_option(path)
  local f = io.open(path, "r")
  if f == nil then return false, "cannot read " .. path end
  local value
  for line in f:lines() do
    local key, rest = line:match("^%s*([%w_]+)%s*=%s*(.-)%s*$")
    if key ~= nil and key:lower() == "schedulerparameters" then value = rest:gsub("%s*#.*$", "") end
  end
  f:close()
  if value ~= nil then
    for item in value:gmatch("[^,%s]+") do
      if item == "time_min_as_soft_limit" then return true, "" end
    end
  end
  return false, path .. " has no SchedulerParameters=time_min_as_soft_limit: --time-min would be a kill limit"
end

-- The release in `slurmctld -V` output ("slurm-wlm 22.05.8", "slurm 24.11.5"):
-- {major, minor, micro}, or nil.
local function parse_release(text)
  text = tostring(text or "")
  local major, minor, micro = text:match("(%d%d)%.(%d%d?)%.(%d+)")
  if major == nil then major, minor = text:match("(%d%d)%.(%d%d?)") end
  if major == nil then return nil end
  return { tonumber(major), tonumber(minor), tonumber(micro or "0") }
end

-- Whether the release has time_min_as_soft_limit (23.11.0+). Returns ok, why-not.
local function soft_release(release)
  if release == nil then
    return false, "the controller's release is unknown (slurmctld -V named none): --time-min may be a kill limit"
  end
  if release[1] < 23 or (release[1] == 23 and release[2] < 11) then
    return false, string.format("Slurm %d.%02d.%d has no time_min_as_soft_limit (it came with 23.11.0): "
                                .. "--time-min would be a kill limit", release[1], release[2], release[3])
  end
  return true, ""
end

-- The controller's release, read once when the script is loaded (never per job: the hook runs
-- under slurmctld's job write lock). The shell popen starts is slurmctld's child: its parent's
-- /proc/PID/exe is the very binary running (even if a newer one replaced it on disk).
local function read_release()
  local binary = '"/proc/$PPID/exe"'
  if CONFIG.slurmctld ~= "" then binary = "'" .. CONFIG.slurmctld:gsub("'", "'\\''") .. "'" end
  local ok, pipe = pcall(io.popen, binary .. " -V 2>/dev/null")
  if not ok or pipe == nil then return nil end
  local text = pipe:read("*a")
  pipe:close()
  return parse_release(text)
end

local RELEASE = read_release()
local SOFT_OK, SOFT_WHY = soft_release(RELEASE)
if SOFT_OK then
  SOFT_OK, SOFT_WHY = soft_limit_option(CONFIG.slurm_conf ~= "" and CONFIG.slurm_conf or this_dir() .. "slurm.conf")
end
if slurm ~= nil and slurm.log_info ~= nil then
  if SOFT_OK then
    slurm.log_info("hpcpredict: Slurm %d.%02d.%d with time_min_as_soft_limit: a soft --time-min may be set",
                   RELEASE[1], RELEASE[2], RELEASE[3])
  else
    slurm.log_info("hpcpredict: soft --time-min refused: %s", SOFT_WHY)
  end
end

-- ------------------------------------------------------------------ libraries
local socket_ok, socket = pcall(require, "socket")
local unix_ok, unix = pcall(require, "socket.unix")
local mime_ok, mime = pcall(require, "mime")
local cjson_ok, cjson_module = pcall(require, "cjson")
local cjson = cjson_ok and cjson_module.new() or nil   -- a private instance: our settings only
if cjson ~= nil then
  cjson.decode_max_depth(32)
  cjson.encode_max_depth(32)
end

local function now() return socket_ok and socket.gettime() or os.time() end

-- Replace every byte that is not part of a valid UTF-8 sequence by U+FFFD: cjson passes bytes
-- through unchecked, and the daemon (which parses strict UTF-8) must never reject a job
-- because of a stray Latin-1 byte.
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

local function base64(s)
  if s == "" then return "" end
  return (mime.b64(s))
end

-- ------------------------------------------------------------------ durations (timefmt.py)
-- Same text as hpcpredict.daemon.timefmt.human (a test runs both over many values).
local function human(seconds)
  if seconds ~= seconds or seconds < 0 or seconds == math.huge then return "?" end
  if seconds < 120 then return string.format("%.0f s", seconds) end
  if seconds < 7200 then return string.format("%.1f min", seconds / 60) end
  if seconds < 3 * 86400 then return string.format("%.1f h", seconds / 3600) end
  return string.format("%.1f d", seconds / 86400)
end

-- Same text as hpcpredict.daemon.timefmt.slurm_time: [D-]HH:MM:SS, rounded up to a minute.
local function slurm_time(seconds)
  local minutes = math.max(1, math.ceil(seconds / 60))
  local days, rest = math.floor(minutes / 1440), minutes % 1440
  local text = string.format("%02d:%02d:00", math.floor(rest / 60), rest % 60)
  if days > 0 then return string.format("%d-%s", days, text) end
  return text
end

-- ------------------------------------------------------------------ numbers
local function finite(v) return type(v) == "number" and v == v and v ~= math.huge and v ~= -math.huge end

-- ------------------------------------------------------------------ job description -> request
local function isset(v)
  return v ~= nil and v ~= NO_VAL and v ~= NO_VAL16 and v ~= INFINITE
end

local function num(v) if isset(v) then return v end return 0 end

local function distribution(task_dist)
  if not isset(task_dist) then return "" end
  return ({ [1] = "cyclic", [2] = "block", [3] = "arbitrary", [4] = "plane" })[task_dist % 16] or ""
end

local function text(v) return utf8_clean(tostring(v or "")) end

-- `extra`: what the hook knows about the job's limits ({max_time_s, default_time_s,
-- user_time_min_s, unlimited}), for the daemon's decision.
local function build_request(job_desc, extra)
  local argv = {}
  if job_desc.argv ~= nil then
    local i = 1                                    -- argv[0] is the script path
    while job_desc.argv[i] ~= nil and i < 1000 do argv[#argv + 1] = text(job_desc.argv[i]); i = i + 1 end
  end
  local environment = {}
  local env = job_desc.environment
  if env ~= nil then
    for name in CONFIG.env_vars:gmatch("[^,%s]+") do
      local v = env[name]
      if v ~= nil then environment[name] = text(v) end
    end
  end
  local script = job_desc.script or ""
  local full = #script
  if full > CONFIG.max_script_bytes then script = script:sub(1, CONFIG.max_script_bytes) end
  local limit = job_desc.time_limit
  local request = {
    job = {
      user = text(job_desc.user_name),
      account = text(job_desc.account),
      partition = text(job_desc.partition),
      job_name = text(job_desc.name),
      qos = text(job_desc.qos),
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
    submit_time = os.time(),
  }
  if #argv > 0 then request.argv = argv end          -- cjson writes an empty table as {}
  if next(environment) ~= nil then request.environment = environment end
  if full > #script then request.script_bytes = full end
  if CONFIG.risk > 0 then request.risk = CONFIG.risk end
  extra = extra or {}
  local function seconds(v) if finite(v) and v > 0 and v < 4294967295 then return math.floor(v) end end
  request.max_time_s = seconds(extra.max_time_s)
  request.default_time_s = seconds(extra.default_time_s)
  request.time_min_s = seconds(extra.user_time_min_s)
  if extra.unlimited then request.time_limit_unlimited = true end
  return request
end

-- ------------------------------------------------------------------ limits of the job's partition/QOS
-- The smallest MaxTime (seconds) of the partitions the job may run in, nil = unlimited.
-- part_list is keyed by partition name (22.05); its records have .name and .max_time (minutes).
local function partition_max_s(job_desc, part_list)
  if type(part_list) ~= "table" then return nil end
  local wanted, any = {}, false
  for name in tostring(job_desc.partition or ""):gmatch("[^,%s]+") do wanted[name] = true; any = true end
  local smallest
  for key, part in pairs(part_list) do
    local name = part.name or key
    local use = (any and wanted[name]) or (not any and tonumber(part.flag_default) == 1)
    if use then
      local max_time = tonumber(part.max_time)
      if max_time ~= nil and isset(max_time) and max_time > 0 then
        smallest = math.min(smallest or math.huge, max_time * 60)
      end
    end
  end
  return smallest
end

-- The DefaultTime (seconds) of the partition the job runs in when it names one (or the
-- default partition), nil = none; with several partitions nil (which one is not known yet).
local function partition_default_s(job_desc, part_list)
  if type(part_list) ~= "table" then return nil end
  local wanted, count = {}, 0
  for name in tostring(job_desc.partition or ""):gmatch("[^,%s]+") do wanted[name] = true; count = count + 1 end
  if count > 1 then return nil end
  for key, part in pairs(part_list) do
    local name = part.name or key
    if (count == 1 and wanted[name]) or (count == 0 and tonumber(part.flag_default) == 1) then
      local default_time = tonumber(part.default_time)
      if default_time ~= nil and isset(default_time) and default_time > 0 then return default_time * 60 end
      return nil
    end
  end
  return nil
end

-- The partition a job without -p runs in (the one flagged Default), so the daemon records and
-- scopes it by its name instead of "".
local function default_partition(part_list)
  if type(part_list) ~= "table" then return "" end
  for key, part in pairs(part_list) do
    if tonumber(part.flag_default) == 1 then return text(part.name or key) end
  end
  return ""
end

local function qos_table()
  local limits = {}
  for name, seconds in CONFIG.qos_max_wall_s:gmatch("([^,%s=]+)%s*=%s*([%d.]+)") do limits[name] = tonumber(seconds) end
  return limits
end

-- The QOS MaxWall that applies (seconds), from the qos_max_wall_s setting; nil = none known.
local function qos_max_s(job_desc, part_list)
  if CONFIG.qos_max_wall_s == "" then return nil end
  local limits = qos_table()
  local names = {}
  local qos = job_desc.qos
  if qos == nil or qos == "" then qos = job_desc.default_qos end   -- the association's default
  if qos ~= nil then names[#names + 1] = tostring(qos) end
  if type(part_list) == "table" then                                -- partition QOS (where exposed)
    for name in tostring(job_desc.partition or ""):gmatch("[^,%s]+") do
      local part = part_list[name]
      if part ~= nil and part.qos ~= nil then names[#names + 1] = tostring(part.qos) end
    end
  end
  local smallest
  for _, name in ipairs(names) do
    if limits[name] ~= nil and limits[name] > 0 then smallest = math.min(smallest or math.huge, limits[name]) end
  end
  return smallest
end

-- ------------------------------------------------------------------ AdminComment: our tagged field
-- Ours is "{hpcpredict=<id>...}" anywhere inside AdminComment; everything else is kept as it is.
local FIELD_PATTERN = "{hpcpredict=[^}]*}"

local function with_our_field(comment, field)
  local rest = tostring(comment or "")
  rest = rest:gsub(FIELD_PATTERN, ""):gsub("^%s+", ""):gsub("%s+$", "")
  if rest == "" then return "{" .. field .. "}" end
  return rest .. " {" .. field .. "}"
end

-- ------------------------------------------------------------------ the call
-- One circuit breaker per slurmctld process: a global of this Lua state, which lives until
-- slurmctld reloads the script.
HPCPREDICT_BREAKER = HPCPREDICT_BREAKER or { failures = 0, open_until = 0 }
local breaker = HPCPREDICT_BREAKER

-- Send one line, read one line, all before `deadline` (socket.gettime() seconds). Returns the
-- decoded response or nil, the reason and whether it counts as a daemon failure.
local function call(method, request, deadline)
  if not (socket_ok and unix_ok and mime_ok) then return nil, "lua-socket (socket.unix, mime) is not installed", false end
  if cjson == nil then return nil, "lua-cjson is not installed", false end
  -- never a negative timeout: lua-socket takes one as "block for ever" (the budget could run
  -- out between a check of left() and the settimeout that follows it)
  local function left() return deadline - socket.gettime() end
  local encoded_ok, line = pcall(cjson.encode, { method = method, request = request })
  if not encoded_ok then return nil, "cannot encode the request: " .. tostring(line), false end
  line = line .. "\n"
  if left() <= 0 then return nil, "budget spent before connecting", true end
  local conn = unix.stream and unix.stream() or unix()
  if conn == nil then return nil, "cannot create a socket", true end
  conn:settimeout(math.max(left(), 0.001))
  local ok, err = conn:connect(CONFIG.hook_socket)
  if not ok then conn:close(); return nil, "connect " .. CONFIG.hook_socket .. ": " .. tostring(err), true end
  local sent = 0
  while sent < #line do
    if left() <= 0 then conn:close(); return nil, "timeout while sending", true end
    conn:settimeout(math.max(left(), 0.001))
    local last, serr, partial = conn:send(line, sent + 1)
    if last == nil then
      if serr ~= "timeout" then conn:close(); return nil, "send: " .. tostring(serr), true end
      sent = partial or sent
    else sent = last end
  end
  local chunks = {}
  while true do
    if left() <= 0 then
      conn:close()
      return nil, string.format("no answer within %.0f ms", CONFIG.budget_s * 1000), true
    end
    conn:settimeout(math.max(left(), 0.001))
    local reply, rerr, partial = conn:receive("*l")
    if reply ~= nil then chunks[#chunks + 1] = reply; break end
    if partial ~= nil and partial ~= "" then chunks[#chunks + 1] = partial end
    if rerr ~= "timeout" then conn:close(); return nil, "receive: " .. tostring(rerr), true end
  end
  conn:close()
  local decoded_ok, reply = pcall(cjson.decode, table.concat(chunks))
  if not decoded_ok then return nil, "bad reply: " .. tostring(reply), true end
  if type(reply) ~= "table" then return nil, "bad reply: not an object", true end
  if reply.ok ~= true then
    -- a job the daemon finds invalid says nothing about the daemon's health
    return nil, "daemon refused: " .. tostring(reply.error), reply.code ~= "INVALID_ARGUMENT"
  end
  if type(reply.response) ~= "table" then return nil, "bad reply: no response object", true end
  return reply.response
end

-- ------------------------------------------------------------------ estimate -> changes
local function number(v) if type(v) == "number" then return v end return nil end

local MODES = { soft = true, bound = true, advise = true }

-- The hook's own checks of the limits the daemon decided. Returns nil when they pass, else why.
-- `job` = {requested_s, user_time_min_s, max_time_s}; limits in seconds (0 = keep).
local function refused(mode, limit_s, min_s, job)
  if limit_s == 0 and min_s == 0 then return nil end
  local cap = CONFIG.max_time_limit_s
  if job.max_time_s ~= nil and job.max_time_s > 0 then cap = math.min(cap, job.max_time_s) end
  for _, v in ipairs({ limit_s, min_s }) do
    if not finite(v) or v < 0 or v % 60 ~= 0 then return "not a whole number of minutes: " .. tostring(v) end
    if v > cap then return string.format("%s above the partition/QOS/site maximum %s", slurm_time(v), slurm_time(cap)) end
  end
  if mode == "advise" then return "advise mode sets no limit" end
  local requested = job.requested_s or 0
  if min_s > 0 then
    if (job.user_time_min_s or 0) > 0 then return "the user gave --time-min" end
    if requested > 0 and min_s >= requested then return "--time-min not below --time" end
    if mode == "bound" and min_s < CONFIG.min_time_limit_s then return "kill-limit --time-min below the site floor" end
    if mode == "soft" and not SOFT_OK then return "soft --time-min refused: " .. SOFT_WHY end
  end
  if limit_s > 0 then
    if mode ~= "bound" then return mode .. " mode never sets --time" end
    if requested > 0 then return "the user gave --time" end
    if limit_s < 60 or (limit_s < CONFIG.min_time_limit_s and limit_s ~= math.floor(cap / 60) * 60) then
      return "--time below the site floor"
    end
  end
  return nil
end

local function one_line(v, limit)
  if type(v) ~= "string" then return "" end
  return utf8_clean(v:sub(1, limit)):gsub("[%c]", " ")
end

-- The changes to make for `estimate`: {time_min = minutes|nil, time_limit = minutes|nil,
-- soft = bool, id, message, mode, reason}; nil and the reason when the estimate changes
-- nothing and says nothing. `job` = {requested_s, user_time_min_s, max_time_s}.
local function plan(estimate, job)
  local runtime = number(estimate.runtime_s)
  local bound = number(estimate.suggested_time_limit_s)
  local cap = CONFIG.max_time_limit_s
  if not finite(runtime) or runtime <= 0 or runtime > cap then
    return nil, "insane estimate: runtime_s=" .. tostring(estimate.runtime_s)
  end
  if not finite(bound) or bound <= 0 or bound > cap then
    return nil, "insane estimate: suggested_time_limit_s=" .. tostring(estimate.suggested_time_limit_s)
  end
  local id = estimate.prediction_id
  if type(id) ~= "string" and type(id) ~= "number" then id = "" end
  id = tostring(id):gsub("[^%w%-_.:]", "")
  -- a daemon that names no mode (older than the modes) decided nothing: advise
  local mode = MODES[estimate.policy_mode] and estimate.policy_mode or "advise"
  local limit_s, min_s = number(estimate.apply_time_limit_s) or 0, number(estimate.apply_time_min_s) or 0
  local reason = one_line(estimate.policy_reason, 64)
  local said = one_line(estimate.user_message, 600)
  if said == "" then said = "predicted runtime " .. human(runtime) end
  local why = refused(mode, limit_s, min_s, job)
  if why ~= nil then
    limit_s, min_s, reason = 0, 0, "refused: " .. why
    said = "predicted runtime " .. human(runtime) .. "; no limit changed (" .. why .. ")"
  end
  local changes = { id = id, mode = mode, reason = reason, soft = mode == "soft" and min_s > 0 }
  if min_s > 0 then changes.time_min = min_s / 60 end
  if limit_s > 0 then changes.time_limit = limit_s / 60 end
  changes.message = "hpcpredict: " .. said .. (id ~= "" and (" [" .. id .. "]") or "")
  return changes
end

-- ------------------------------------------------------------------ the hook
local function submit(job_desc, part_list, started)
  if not CONFIG.enabled then return end
  if job_desc.script == nil then return end  -- salloc/srun allocations: nothing to parse
  local user = tostring(job_desc.user_name)
  if CONFIG.breaker_failures > 0 and breaker.failures >= CONFIG.breaker_failures and started < breaker.open_until then
    slurm.log_info("hpcpredict: breaker open after %d failures (retry in %.0f s): job of %s accepted unchanged",
                   breaker.failures, breaker.open_until - started, user)
    return
  end
  local requested_min = job_desc.time_limit
  local requested_s = 0
  if requested_min == INFINITE then requested_s = math.huge       -- --time=UNLIMITED: a request
  elseif isset(requested_min) then requested_s = requested_min * 60 end
  local user_time_min_s = (isset(job_desc.time_min) and job_desc.time_min > 0) and job_desc.time_min * 60 or 0
  local max_time_s = partition_max_s(job_desc, part_list)
  local qos_s = qos_max_s(job_desc, part_list)
  if qos_s ~= nil then max_time_s = math.min(max_time_s or math.huge, qos_s) end
  local ok, request = pcall(build_request, job_desc, {
    max_time_s = max_time_s, default_time_s = partition_default_s(job_desc, part_list),
    user_time_min_s = user_time_min_s, unlimited = requested_s == math.huge })
  if not ok then
    slurm.log_error("hpcpredict: fail-open, job of %s accepted unchanged: cannot build request: %s", user, tostring(request))
    return
  end
  if request.job.partition == "" then request.job.partition = default_partition(part_list) end
  if request.job.account == "" then request.job.account = text(job_desc.default_account) end
  local estimate, why, failed = call("Predict", request, started + CONFIG.budget_s)
  local took_ms = (now() - started) * 1000
  if estimate == nil then
    if failed then
      breaker.failures = breaker.failures + 1
      if CONFIG.breaker_failures > 0 and breaker.failures >= CONFIG.breaker_failures then
        breaker.open_until = now() + CONFIG.breaker_cooldown_s
        slurm.log_error("hpcpredict: %d consecutive failures: not calling the daemon for %.0f s",
                        breaker.failures, CONFIG.breaker_cooldown_s)
      end
    end
    slurm.log_error("hpcpredict: fail-open, job of %s accepted unchanged (%.0f ms): %s", user, took_ms, tostring(why))
    return
  end
  breaker.failures = 0
  local changes
  changes, why = plan(estimate, { requested_s = requested_s, user_time_min_s = user_time_min_s, max_time_s = max_time_s })
  if changes == nil then
    slurm.log_error("hpcpredict: job of %s accepted unchanged (%.0f ms): %s", user, took_ms, tostring(why))
    return
  end
  -- Every check passed: only now is the job touched.
  if changes.time_min then job_desc.time_min = changes.time_min end
  if changes.time_limit then job_desc.time_limit = changes.time_limit end
  if changes.id ~= "" then
    -- ";limit=auto" / ";time_min=auto" (a kill limit) / ";time_min=soft" tell the prolog
    -- scripts which limit is ours, not the user's, and what it does
    -- ";time=none": the user gave no --time, so the TimeLimit the prolog reads is the partition's
    -- (or a running unlimited job's year), not a request
    job_desc.admin_comment = with_our_field(job_desc.admin_comment, "hpcpredict=" .. changes.id ..
      (changes.time_limit and ";limit=auto" or (requested_s == 0 and ";time=none" or "")) ..
      (changes.time_min and (changes.soft and ";time_min=soft" or ";time_min=auto") or ""))
    if job_desc.environment ~= nil then job_desc.environment.HPCPREDICT_PREDICTION_ID = changes.id end
  end
  slurm.log_user("%s", changes.message)
  slurm.log_info("%s (user %s, %s: %s, %.0f ms)", changes.message, user, changes.mode, changes.reason, took_ms)
end

function slurm_job_submit(job_desc, part_list, submit_uid)
  local started = now()            -- the budget covers everything this hook does
  local ok, err = pcall(submit, job_desc, part_list, started)
  if not ok then
    slurm.log_error("hpcpredict: fail-open, job accepted unchanged: %s", tostring(err))
  end
  return slurm.SUCCESS
end

function slurm_job_modify(job_desc, job_rec, part_list, modify_uid)
  return slurm.SUCCESS
end

-- For tests (lua5.1 outside slurmctld): expose the pure parts.
HPCPREDICT = { cjson = cjson, base64 = base64, utf8_clean = utf8_clean, plan = plan, refused = refused,
               soft_limit_option = soft_limit_option, soft_ok = SOFT_OK, soft_why = SOFT_WHY, release = RELEASE,
               parse_release = parse_release, soft_release = soft_release, partition_default_s = partition_default_s,
               human = human, slurm_time = slurm_time, with_our_field = with_our_field,
               partition_max_s = partition_max_s, qos_max_s = qos_max_s, build_request = build_request,
               call = call, config = CONFIG, breaker = breaker }

return slurm and slurm.SUCCESS or 0
