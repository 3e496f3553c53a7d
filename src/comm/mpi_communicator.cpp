// The MPI implementation of the Communicator: MPI_COMM_WORLD, host buffers, non-blocking point-to-point for
// boundary rows. Only the calling thread uses MPI (MPI_THREAD_FUNNELED).
#include <mpi.h>

#include <algorithm>
#include <climits>
#include <cstdlib>

#include "nj/comm/communicator.hpp"
#include "nj/core/error.hpp"

namespace nj {
namespace {

void check(int status, const char* call) {
  if (status == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  MPI_Error_string(status, text, &length);
  throw Error(fmt::format("{} failed: {}", call, std::string(text, static_cast<std::size_t>(length))));
}

// The most elements one MPI call carries: its count is an int. NJ_MPI_MESSAGE_ELEMENTS lowers it, so that tests
// split small buffers into many messages.
std::size_t message_limit() {
  const char* text = std::getenv("NJ_MPI_MESSAGE_ELEMENTS");
  if (text == nullptr) return static_cast<std::size_t>(INT_MAX);
  char* end = nullptr;
  const long long limit = std::strtoll(text, &end, 10);
  NJ_REQUIRE(end != text && *end == '\0' && limit > 0 && limit <= INT_MAX,
             "NJ_MPI_MESSAGE_ELEMENTS={}: expected a whole number from 1 to {}", text, INT_MAX);
  return static_cast<std::size_t>(limit);
}

// Calls call(offset, count) for consecutive pieces of `size` elements, each at most `limit` long (none for 0).
template <typename Call>
void in_pieces(std::size_t size, std::size_t limit, Call&& call) {
  for (std::size_t offset = 0; offset < size; offset += limit) {
    call(offset, static_cast<int>(std::min(limit, size - offset)));
  }
}

class MpiPendingExchange final : public PendingExchange {
 public:
  explicit MpiPendingExchange(std::vector<MPI_Request> requests) : requests_(std::move(requests)) {}
  MpiPendingExchange(const MpiPendingExchange&) = delete;
  MpiPendingExchange& operator=(const MpiPendingExchange&) = delete;
  // Reached with requests still open only when an error unwinds past an exchange. Waiting could hang (the peer
  // may be the rank that failed), so the requests are cancelled and released; the error then aborts the job.
  ~MpiPendingExchange() override {
    for (MPI_Request& request : requests_) {
      if (request == MPI_REQUEST_NULL) continue;
      MPI_Cancel(&request);
      MPI_Request_free(&request);
    }
  }
  bool test() override {
    int done = 1;
    if (!requests_.empty()) {
      check(MPI_Testall(static_cast<int>(requests_.size()), requests_.data(), &done, MPI_STATUSES_IGNORE),
            "MPI_Testall");
    }
    if (done != 0) requests_.clear();
    return done != 0;
  }
  void wait() override {
    if (requests_.empty()) return;
    const int status = MPI_Waitall(static_cast<int>(requests_.size()), requests_.data(), MPI_STATUSES_IGNORE);
    requests_.clear();
    check(status, "MPI_Waitall");
  }

 private:
  std::vector<MPI_Request> requests_;
};

// Apart from the boundary exchanges' tags (2 per layer) and the gather's (30000), so that a redistribution never meets
// a message of theirs.
constexpr int kAllToAllTag = 30001;

class MpiCommunicator final : public Communicator {
 public:
  MpiCommunicator() : limit_(message_limit()) {
    check(MPI_Comm_rank(MPI_COMM_WORLD, &rank_), "MPI_Comm_rank");
    check(MPI_Comm_size(MPI_COMM_WORLD, &size_), "MPI_Comm_size");
  }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  void all_reduce_sum(std::span<float> values) override { reduce(values.data(), values.size(), MPI_FLOAT, MPI_SUM); }
  void all_reduce_sum(std::span<double> values) override { reduce(values.data(), values.size(), MPI_DOUBLE, MPI_SUM); }
  void all_reduce_sum(std::span<std::int64_t> values) override {
    reduce(values.data(), values.size(), MPI_INT64_T, MPI_SUM);
  }
  void all_reduce_max(std::span<double> values) override { reduce(values.data(), values.size(), MPI_DOUBLE, MPI_MAX); }
  void broadcast(std::span<std::byte> bytes, int root) override {
    in_pieces(bytes.size(), limit_, [&](std::size_t offset, int count) {
      check(MPI_Bcast(bytes.data() + offset, count, MPI_BYTE, root, MPI_COMM_WORLD), "MPI_Bcast");
    });
  }

  std::vector<std::vector<std::byte>> all_to_all(std::vector<std::vector<std::byte>> to_each) override {
    NJ_EXPECTS(static_cast<int>(to_each.size()) == size_, "{} messages for {} ranks", to_each.size(), size_);
    std::vector<std::int64_t> sizes(to_each.size());
    std::vector<std::int64_t> incoming(to_each.size());
    for (std::size_t q = 0; q < to_each.size(); ++q) sizes[q] = static_cast<std::int64_t>(to_each[q].size());
    check(MPI_Alltoall(sizes.data(), 1, MPI_INT64_T, incoming.data(), 1, MPI_INT64_T, MPI_COMM_WORLD), "MPI_Alltoall");
    std::vector<std::vector<std::byte>> from_each(to_each.size());
    std::vector<MPI_Request> requests;
    for (std::size_t q = 0; q < to_each.size(); ++q) {
      from_each[q].resize(static_cast<std::size_t>(incoming[q]));
      in_pieces(from_each[q].size(), limit_, [&](std::size_t offset, int count) {
        check(MPI_Irecv(from_each[q].data() + offset, count, MPI_BYTE, static_cast<int>(q), kAllToAllTag,
                        MPI_COMM_WORLD, &requests.emplace_back()),
              "MPI_Irecv");
      });
    }
    for (std::size_t q = 0; q < to_each.size(); ++q) {
      in_pieces(to_each[q].size(), limit_, [&](std::size_t offset, int count) {
        check(MPI_Isend(to_each[q].data() + offset, count, MPI_BYTE, static_cast<int>(q), kAllToAllTag, MPI_COMM_WORLD,
                        &requests.emplace_back()),
              "MPI_Isend");
      });
    }
    MpiPendingExchange(std::move(requests)).wait();
    return from_each;
  }

  std::unique_ptr<PendingExchange> start_exchange(std::span<const SendBuffer> sends,
                                                  std::span<const ReceiveBuffer> receives, int tag) override {
    // A buffer larger than one message travels as several, cut alike on both sides (the receiver's buffer is the
    // sender's size); MPI delivers the messages of one peer and tag in the order they were posted.
    std::vector<MPI_Request> requests;
    // Receives first, so that a send that arrives finds its buffer posted.
    for (const ReceiveBuffer& r : receives) {
      NJ_EXPECTS(r.space == MemorySpace::kHost, "the MPI communicator receives into host memory only");
      in_pieces(r.floats.size(), limit_, [&](std::size_t offset, int count) {
        check(MPI_Irecv(r.floats.data() + offset, count, MPI_FLOAT, r.peer, tag, MPI_COMM_WORLD,
                        &requests.emplace_back()),
              "MPI_Irecv");
      });
    }
    for (const SendBuffer& s : sends) {
      NJ_EXPECTS(s.space == MemorySpace::kHost, "the MPI communicator sends from host memory only");
      in_pieces(s.floats.size(), limit_, [&](std::size_t offset, int count) {
        check(MPI_Isend(s.floats.data() + offset, count, MPI_FLOAT, s.peer, tag, MPI_COMM_WORLD,
                        &requests.emplace_back()),
              "MPI_Isend");
      });
    }
    return std::make_unique<MpiPendingExchange>(std::move(requests));
  }

  [[noreturn]] void abort(int code) noexcept override {
    MPI_Abort(MPI_COMM_WORLD, code);
    std::_Exit(code);
  }

 private:
  template <typename T>
  void reduce(T* values, std::size_t count, MPI_Datatype type, MPI_Op op) {
    in_pieces(count, limit_, [&](std::size_t offset, int piece) {
      check(MPI_Allreduce(MPI_IN_PLACE, values + offset, piece, type, op, MPI_COMM_WORLD), "MPI_Allreduce");
    });
  }

  std::size_t limit_;  // elements a message carries at most
  int rank_ = 0;
  int size_ = 1;
};

}  // namespace

bool MpiSession::launched() {
  for (const char* variable : {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK"}) {
    if (std::getenv(variable) != nullptr) return true;
  }
  return false;
}

MpiSession::MpiSession() {
  if (!launched()) return;
  int provided = 0;
  check(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided), "MPI_Init_thread");
  active_ = true;
  // Only the main thread calls MPI, but other threads run (OpenMP, the copy engine): MPI must know.
  NJ_REQUIRE(provided >= MPI_THREAD_FUNNELED, "this MPI library does not support threads (MPI_THREAD_FUNNELED)");
  // Errors come back as codes and become exceptions, which the CLI turns into one line and an abort.
  check(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler");
}

MpiSession::~MpiSession() {
  if (active_) MPI_Finalize();
}

std::unique_ptr<Communicator> MpiSession::communicator() const {
  if (!active_) return make_single_process_communicator();
  return std::make_unique<MpiCommunicator>();
}

}  // namespace nj
