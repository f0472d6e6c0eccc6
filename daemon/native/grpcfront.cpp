// A gRPC front end in C++ that hands requests to Python in batches.
//
// Why: gRPC Python's thread-pool server passes the interpreter lock between its polling thread
// and a worker thread three to four times per unary call, and that, not the handler, set the
// daemon's ceiling (benchmarks/README.md, issue 9). Here every byte of gRPC work (HTTP/2,
// accepting, reading, writing, refusing past the concurrency limit, health checks) runs in C++
// threads that never take the interpreter lock. Python dispatcher threads take whole batches of
// decoded-to-bytes requests with one lock acquisition (`next_batch`) and answer each with
// `reply`. The protocol buffers are parsed and built in Python, so this file knows no message
// type but one: it serves every method through grpc::AsyncGenericService, and answers
// grpc.health.v1.Health/Check itself (two fields, encoded by hand; Watch is not served).
//
// A call's life (one operation outstanding at a time, so the Call pointer is the tag):
//   REQUESTED --accept--> READING --message--> IN_PYTHON --reply--> FINISHING --> deleted
// (a health check goes from READING straight to FINISHING, answered in the polling thread)
// A streaming call (server reflection) loops IN_PYTHON --reply--> WRITING --> READING until the
// client half-closes. Past max_concurrent calls in flight a new call is answered
// RESOURCE_EXHAUSTED at once, before any Python runs.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <pthread.h>
#include <sched.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <grpcpp/generic/async_generic_service.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/security/server_credentials.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <tuple>
#include <unordered_map>
#include <vector>

namespace py = pybind11;

namespace {

class Front;

struct Call {
  enum class State { kRequested, kReading, kInPython, kWriting, kFinishing };

  explicit Call(Front* front) : front(front), stream(&context) {}

  void Proceed(bool ok);

  Front* front;
  grpc::GenericServerContext context;
  grpc::GenericServerAsyncReaderWriter stream;
  grpc::ByteBuffer buffer;
  State state = State::kRequested;
  bool streaming = false;
  bool counted = false;  // holds one of the max_concurrent places
  bool health = false;   // grpc.health.v1.Health/Check, answered without Python
};

const char kHealthCheckMethod[] = "/grpc.health.v1.Health/Check";

struct Pending {
  uint64_t id;
  std::string method;
  std::string payload;
  std::string peer;
};

std::string Flatten(const grpc::ByteBuffer& buffer) {
  std::vector<grpc::Slice> slices;
  std::string out;
  if (!buffer.Dump(&slices).ok()) return out;
  out.reserve(buffer.Length());
  for (const auto& slice : slices) out.append(reinterpret_cast<const char*>(slice.begin()), slice.size());
  return out;
}

class Front {
 public:
  Front(int max_concurrent, int max_message_bytes, std::set<std::string> streaming_methods, double stuck_s,
        bool background_io)
      : background_io_(background_io),
        max_concurrent_(max_concurrent),
        max_message_bytes_(max_message_bytes),
        streaming_methods_(std::move(streaming_methods)),
        stuck_(std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::duration<double>(stuck_s))) {}

  ~Front() { Stop(0.0); }

  void AddInsecurePort(const std::string& address) { ports_.emplace_back(address, "", "", nullptr); }

  int AddSecurePort(const std::string& address, const std::string& key_pem, const std::string& cert_pem) {
    ports_.emplace_back(address, key_pem, cert_pem, std::make_unique<int>(0));
    return static_cast<int>(ports_.size()) - 1;  // index; the bound port is read after Start
  }

  int BoundPort(int index) const {
    if (index < 0 || index >= static_cast<int>(ports_.size()) || !std::get<3>(ports_[index])) return 0;
    return *std::get<3>(ports_[index]);
  }

  void Start() {
    if (server_) throw std::runtime_error("front end already started");
    // grpc++'s own health service is built on the callback API, which on this platform runs
    // two "nexting" threads at normal priority that take turns polling every socket: they
    // preempted the Python dispatchers ~2,300 times a second and doubled the context switches
    // per Predict (benchmarks/README.md, issue 9). Health checks are answered here instead.
    grpc::EnableDefaultHealthCheckService(false);
    grpc::ServerBuilder builder;
    for (auto& [address, key, cert, bound] : ports_) {
      if (key.empty()) {
        builder.AddListeningPort(address, grpc::InsecureServerCredentials());
      } else {
        grpc::SslServerCredentialsOptions options;
        options.pem_key_cert_pairs.push_back({key, cert});
        builder.AddListeningPort(address, grpc::SslServerCredentials(options), bound.get());
      }
    }
    builder.SetMaxReceiveMessageSize(max_message_bytes_);
    builder.SetMaxSendMessageSize(max_message_bytes_);
    builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
    builder.RegisterAsyncGenericService(&service_);
    cq_ = builder.AddCompletionQueue();
    server_ = builder.BuildAndStart();
    if (!server_) throw std::runtime_error("cannot listen on the configured addresses");
    for (int i = 0; i < 4; ++i) RequestOne();  // accepts kept posted; each accepted call posts one more
    poller_ = std::thread([this] { Poll(); });
  }

  void SetServing(const std::string& service, bool serving) {
    std::lock_guard<std::mutex> lock(health_mu_);
    serving_[service] = serving;
  }

  // grpc.health.v1.Health/Check, answered in the polling thread: the reply for a serialized
  // HealthCheckRequest, or a non-OK status (unknown service: NOT_FOUND, as grpc's own service).
  grpc::Status HealthCheck(const std::string& request, std::string* reply) {
    std::string service;
    if (!ParseHealthRequest(request, &service))
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "not a HealthCheckRequest");
    bool serving;
    {
      std::lock_guard<std::mutex> lock(health_mu_);
      auto found = serving_.find(service);
      if (found == serving_.end()) return grpc::Status(grpc::StatusCode::NOT_FOUND, "unknown service");
      serving = found->second;
    }
    // HealthCheckResponse{status = 1}: field 1, varint; SERVING = 1, NOT_SERVING = 2
    *reply = std::string{'\x08', serving ? '\x01' : '\x02'};
    return grpc::Status::OK;
  }

  // Up to max_calls requests, waiting at most timeout_s for the first; None once stopped.
  //
  // One dispatcher runs Python at a time while it makes progress. Two dispatchers both running
  // handlers would pass the interpreter lock back and forth (Python forces a switch every 5 ms),
  // adding up to a whole batch of the other's work to a handler's time. A second dispatcher
  // takes calls only while the active one has answered nothing for `stuck` (an fsync'ed
  // outcome, a reload), so one slow call never holds the quick ones.
  py::object NextBatch(int max_calls, double timeout_s) {
    thread_local bool active = false;
    std::vector<Pending> batch;
    bool stopped = false;
    {
      py::gil_scoped_release release;
      std::unique_lock<std::mutex> lock(mu_);
      if (active) {
        active = false;
        --active_;
      }
      auto end = std::chrono::steady_clock::now() + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                                        std::chrono::duration<double>(timeout_s));
      while (true) {
        auto now = std::chrono::steady_clock::now();
        if (queue_.empty() && closed_) {
          stopped = true;
          break;
        }
        bool stuck = active_ > 0 && now - progress_ >= stuck_;
        if (!queue_.empty() && (active_ == 0 || stuck)) {
          while (!queue_.empty() && static_cast<int>(batch.size()) < max_calls) {
            batch.push_back(std::move(queue_.front()));
            queue_.pop_front();
          }
          active = true;
          ++active_;
          progress_ = now;
          break;
        }
        if (now >= end) break;
        // While another dispatcher is active and answering, nobody wakes this one for new calls
        // (that would be a context switch per call): it looks again when that one would count
        // as stuck.
        auto wake = end;
        if (active_ > 0 && !stuck && progress_ + stuck_ < wake) wake = progress_ + stuck_;
        ready_.wait_until(lock, wake);
      }
    }
    if (stopped) return py::none();
    py::list out(batch.size());
    for (size_t i = 0; i < batch.size(); ++i) {
      auto& p = batch[i];
      out[i] = py::make_tuple(p.id, py::str(p.method), py::bytes(p.payload), py::str(p.peer));
    }
    return std::move(out);
  }

  // Answers a call: status 0 sends payload (unary: and finishes); otherwise finishes with the
  // status and details. Unknown ids (the client went away and the call was finished) are ignored.
  bool Reply(uint64_t id, int status, const std::string& details, const py::bytes& payload) {
    grpc::ByteBuffer out;
    if (status == 0) {
      char* data = nullptr;
      Py_ssize_t size = 0;
      if (PyBytes_AsStringAndSize(payload.ptr(), &data, &size) != 0) throw py::error_already_set();
      grpc::Slice slice(data, static_cast<size_t>(size));
      out = grpc::ByteBuffer(&slice, 1);
    }
    py::gil_scoped_release release;
    Call* call;
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto found = in_python_.find(id);
      if (found == in_python_.end()) return false;
      call = found->second;
      in_python_.erase(found);
      progress_ = std::chrono::steady_clock::now();
      if (in_python_.empty()) drained_.notify_all();
    }
    if (status != 0) {
      call->state = Call::State::kFinishing;
      call->stream.Finish(grpc::Status(static_cast<grpc::StatusCode>(status), details), call);
    } else if (call->streaming) {
      call->state = Call::State::kWriting;
      call->stream.Write(out, call);
    } else {
      call->state = Call::State::kFinishing;
      call->stream.WriteAndFinish(out, grpc::WriteOptions(), grpc::Status::OK, call);
    }
    return true;
  }

  // Stop accepting, let the calls Python holds finish for up to grace_s (the dispatchers keep
  // answering meanwhile), answer the rest UNAVAILABLE, stop the pollers, and wake the
  // dispatchers with None.
  void Stop(double grace_s) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!server_ || stopping_) return;
      stopping_ = true;
    }
    std::optional<py::gil_scoped_release> release;
    if (PyGILState_Check()) release.emplace();
    auto deadline = std::chrono::system_clock::now() +
                    std::chrono::microseconds(static_cast<int64_t>(grace_s * 1e6));
    std::thread shutter([this, deadline] { server_->Shutdown(deadline); });
    std::vector<Call*> unanswered;
    {
      std::unique_lock<std::mutex> lock(mu_);
      drained_.wait_until(lock, deadline, [this] { return in_python_.empty(); });
      closed_ = true;
      queue_.clear();
      for (auto& [id, call] : in_python_) unanswered.push_back(call);
      in_python_.clear();
    }
    ready_.notify_all();
    for (Call* call : unanswered) FinishShuttingDown(call);
    shutter.join();
    cq_->Shutdown();
    if (poller_.joinable()) poller_.join();
  }

  py::dict Stats() {
    py::dict stats;
    stats["in_flight"] = in_flight_.load();
    stats["refused"] = refused_.load();
    return stats;
  }

  // -- used by Call, from the polling thread --
  void RequestOne() {
    auto* call = new Call(this);
    service_.RequestCall(&call->context, &call->stream, cq_.get(), cq_.get(), call);
  }

  bool Admit(Call* call) {
    if (in_flight_.fetch_add(1) >= max_concurrent_) {
      in_flight_.fetch_sub(1);
      refused_.fetch_add(1);
      return false;
    }
    call->counted = true;
    return true;
  }

  void Release(Call* call) {
    if (call->counted) in_flight_.fetch_sub(1);
  }

  bool IsStreaming(const std::string& method) const { return streaming_methods_.count(method) > 0; }

  // Keeps one accept posted per accepted call. Under the lock, so that no accept is posted
  // after Stop has begun (Stop shuts the completion queue down once the server has stopped).
  void RequestAnother() {
    std::lock_guard<std::mutex> lock(mu_);
    if (!stopping_) RequestOne();
  }

  // HealthCheckRequest{string service = 1}; unknown fields skipped as protobuf does.
  static bool ParseHealthRequest(const std::string& data, std::string* service) {
    size_t at = 0;
    auto varint = [&](uint64_t* value) {
      *value = 0;
      for (int shift = 0; shift < 64 && at < data.size(); shift += 7) {
        uint8_t byte = static_cast<uint8_t>(data[at++]);
        *value |= static_cast<uint64_t>(byte & 0x7f) << shift;
        if (!(byte & 0x80)) return true;
      }
      return false;
    };
    while (at < data.size()) {
      uint64_t key, length;
      if (!varint(&key)) return false;
      switch (key & 7) {
        case 0:
          if (!varint(&length)) return false;
          break;
        case 1:
          if (data.size() - at < 8) return false;
          at += 8;
          break;
        case 2:
          if (!varint(&length) || length > data.size() - at) return false;
          if ((key >> 3) == 1) service->assign(data, at, length);
          at += length;
          break;
        case 5:
          if (data.size() - at < 4) return false;
          at += 4;
          break;
        default:
          return false;
      }
    }
    return true;
  }

  void ToPython(Call* call, std::string payload) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (closed_) {
        FinishShuttingDown(call);
        return;
      }
      uint64_t id = next_id_++;
      in_python_.emplace(id, call);
      queue_.push_back(Pending{id, call->context.method(), std::move(payload), call->context.peer()});
      // an active dispatcher takes it when it comes back for more (see NextBatch)
      if (active_ > 0 && std::chrono::steady_clock::now() - progress_ < stuck_) return;
      // Otherwise a dispatcher is woken once the completion queue has nothing more ready
      // (Poll), so that it starts on every request read so far, not on the first of them.
      wake_pending_ = true;
    }
  }

  // Wakes a dispatcher for the requests queued since the last wake (Poll, before it blocks).
  void WakeDispatcher() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!wake_pending_) return;
      wake_pending_ = false;
    }
    ready_.notify_one();
  }

 private:
  static void FinishShuttingDown(Call* call) {
    call->state = Call::State::kFinishing;
    call->stream.Finish(grpc::Status(grpc::StatusCode::UNAVAILABLE, "hpcpredictd is shutting down"), call);
  }

  void Poll() {
    // Background priority (SCHED_IDLE; nice 19 where that is refused): a handler is not
    // preempted by the accepting, reading and refusing of further calls, which wait until
    // Python pauses. At 128 callers, half of them refused and calling again at once, this took
    // the handlers' p99 from 2.2-3.5 ms (nice 10) to 1.0-1.9 ms (benchmarks/README.md, issue 9).
    // Not starved: CFS still gives SCHED_IDLE threads a small share while Python is busy.
    if (background_io_) {
      struct sched_param param = {};
      if (pthread_setschedparam(pthread_self(), SCHED_IDLE, &param) != 0) {
        auto thread = static_cast<id_t>(syscall(SYS_gettid));
        setpriority(PRIO_PROCESS, thread, 19);
      }
    }
    // Events already due are handled before a dispatcher is woken: woken at the first request
    // (and, on the same CPU, running at once over this background thread) it would answer
    // that one and sleep again, a pair of context switches per call. Waking it when the queue
    // has nothing more ready hands it every request read so far (benchmarks/README.md, issue 9).
    // At most kEventsPerWake events are handled between wakes, so a flood of refusals cannot
    // hold back calls already queued.
    constexpr int kEventsPerWake = 64;
    const gpr_timespec now_only = gpr_time_0(GPR_CLOCK_MONOTONIC);
    void* tag;
    bool ok;
    int handled = 0;
    while (true) {
      auto status = cq_->AsyncNext(&tag, &ok, now_only);
      if (status == grpc::CompletionQueue::TIMEOUT || handled >= kEventsPerWake) {
        WakeDispatcher();
        handled = 0;
        if (status == grpc::CompletionQueue::TIMEOUT && !cq_->Next(&tag, &ok)) break;
      }
      if (status == grpc::CompletionQueue::SHUTDOWN) break;
      static_cast<Call*>(tag)->Proceed(ok);
      ++handled;
    }
    WakeDispatcher();
  }

  bool background_io_;
  int max_concurrent_;
  int max_message_bytes_;
  std::set<std::string> streaming_methods_;
  std::chrono::steady_clock::duration stuck_;  // see NextBatch
  std::vector<std::tuple<std::string, std::string, std::string, std::unique_ptr<int>>> ports_;
  grpc::AsyncGenericService service_;
  std::unique_ptr<grpc::ServerCompletionQueue> cq_;
  std::unique_ptr<grpc::Server> server_;
  std::thread poller_;  // the one thread that polls the completion queue (Poll)
  std::mutex mu_;
  std::condition_variable ready_;
  std::condition_variable drained_;
  std::deque<Pending> queue_;
  std::unordered_map<uint64_t, Call*> in_python_;
  uint64_t next_id_ = 1;
  int active_ = 0;  // dispatchers running a batch in Python
  bool wake_pending_ = false;  // requests queued since the last wake (WakeDispatcher)
  std::chrono::steady_clock::time_point progress_;  // the last batch taken or call answered
  bool closed_ = false;
  bool stopping_ = false;
  std::atomic<int> in_flight_{0};
  std::mutex health_mu_;
  std::unordered_map<std::string, bool> serving_{{"", true}};  // as grpc's: the server as a whole serves
  std::atomic<uint64_t> refused_{0};
};

void Call::Proceed(bool ok) {
  switch (state) {
    case State::kRequested:
      if (!ok) {  // the server is shutting down: no call came
        delete this;
        return;
      }
      front->RequestAnother();
      streaming = front->IsStreaming(context.method());
      health = context.method() == kHealthCheckMethod;
      // A health check is never refused: a probe must see a busy daemon as alive.
      if (!health && !front->Admit(this)) {
        state = State::kFinishing;
        stream.Finish(grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                                   "hpcpredictd is at its concurrency limit; retry shortly"),
                      this);
        return;
      }
      state = State::kReading;
      stream.Read(&buffer, this);
      return;
    case State::kReading:
      if (!ok) {  // the client half-closed (a stream's normal end) or went away
        state = State::kFinishing;
        stream.Finish(streaming ? grpc::Status::OK
                                : grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "no request message"),
                      this);
        return;
      }
      if (health) {
        std::string reply;
        grpc::Status status = front->HealthCheck(Flatten(buffer), &reply);
        buffer.Clear();
        state = State::kFinishing;
        if (!status.ok()) {
          stream.Finish(status, this);
        } else {
          grpc::Slice slice(reply);
          stream.WriteAndFinish(grpc::ByteBuffer(&slice, 1), grpc::WriteOptions(), grpc::Status::OK, this);
        }
        return;
      }
      state = State::kInPython;
      front->ToPython(this, Flatten(buffer));
      buffer.Clear();
      return;
    case State::kWriting:
      if (!ok) {
        state = State::kFinishing;
        stream.Finish(grpc::Status::CANCELLED, this);
        return;
      }
      state = State::kReading;
      stream.Read(&buffer, this);
      return;
    case State::kFinishing:
      front->Release(this);
      delete this;
      return;
    case State::kInPython:
      return;  // no operation is outstanding while Python holds the call
  }
}

}  // namespace

PYBIND11_MODULE(_grpcfront, m) {
  m.doc() = "gRPC front end in C++ handing requests to Python dispatcher threads in batches.";
  py::class_<Front>(m, "Front")
      .def(py::init<int, int, std::set<std::string>, double, bool>(), py::arg("max_concurrent"),
           py::arg("max_message_bytes"),
           py::arg("streaming_methods") = std::set<std::string>(), py::arg("stuck_s") = 0.002,
           py::arg("background_io") = false)
      .def("add_insecure_port", &Front::AddInsecurePort, py::arg("address"))
      .def("add_secure_port", &Front::AddSecurePort, py::arg("address"), py::arg("key_pem"), py::arg("cert_pem"))
      .def("bound_port", &Front::BoundPort, py::arg("index"))
      .def("start", &Front::Start, py::call_guard<py::gil_scoped_release>())
      .def("set_serving", &Front::SetServing, py::arg("service"), py::arg("serving"))
      .def("next_batch", &Front::NextBatch, py::arg("max_calls"), py::arg("timeout_s"))
      .def("reply", &Front::Reply, py::arg("call_id"), py::arg("status"), py::arg("details"), py::arg("payload"))
      .def("stop", &Front::Stop, py::arg("grace_s"))
      .def("stats", &Front::Stats);
}
