// Slot snapshots and restores on a stream of their own (Backend's copies off
// the op stream). A copy waits for the ops enqueued before it through an
// event on the op stream; the op stream never waits for a copy, so a step is
// never held up by one: the engine keeps the slot out of steps until
// CopyDone instead.
#include "absl/strings/str_cat.h"
#include "kernels/cuda/cuda_backend_impl.h"

namespace seqboat::cuda {

absl::StatusOr<HostBuffer> CudaBackend::AllocHost(size_t bytes) {
  UseDevice();
  void* p = nullptr;
  const cudaError_t e = cudaMallocHost(&p, bytes);
  if (e != cudaSuccess) {
    cudaGetLastError();  // an allocation failure is not sticky
    return absl::ResourceExhaustedError(
        absl::StrCat("cannot pin ", bytes,
                     " bytes of host memory for slot "
                     "copies (",
                     cudaGetErrorString(e), ")"));
  }
  return HostBuffer(p, [](void* q) { cudaFreeHost(q); });
}

CopyTicket CudaBackend::EnqueueCopy(void* dst, const void* src, size_t bytes,
                                    cudaMemcpyKind kind) {
  if (bytes == 0) return 0;
  UseDevice();
  if (copy_stream_ == nullptr) {
    Check(cudaStreamCreateWithFlags(&copy_stream_, cudaStreamNonBlocking),
          "cudaStreamCreate (copies)");
    Check(cudaEventCreateWithFlags(&ops_mark_, cudaEventDisableTiming),
          "cudaEventCreate (copies)");
    if (copy_stream_ == nullptr || ops_mark_ == nullptr) {
      // Nothing to queue on: copy in op order and wait, as CopyToHost does.
      Check(cudaMemcpyAsync(dst, src, bytes, kind, stream_), "cudaMemcpyAsync");
      Check(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");
      return 0;
    }
  }
  Check(cudaEventRecord(ops_mark_, stream_), "cudaEventRecord (copies)");
  Check(cudaStreamWaitEvent(copy_stream_, ops_mark_, 0),
        "cudaStreamWaitEvent (copies)");
  Check(cudaMemcpyAsync(dst, src, bytes, kind, copy_stream_),
        kind == cudaMemcpyDeviceToHost ? "cudaMemcpyAsync (slot snapshot)"
                                       : "cudaMemcpyAsync (slot restore)");
  cudaEvent_t done = nullptr;
  if (!spare_copy_events_.empty()) {
    done = spare_copy_events_.back();
    spare_copy_events_.pop_back();
  } else {
    Check(cudaEventCreateWithFlags(&done, cudaEventDisableTiming),
          "cudaEventCreate (copies)");
  }
  const CopyTicket ticket = ++last_ticket_;
  if (done == nullptr) {
    Check(cudaStreamSynchronize(copy_stream_), "cudaStreamSynchronize");
    done_ticket_ = ticket;
    return ticket;
  }
  Check(cudaEventRecord(done, copy_stream_), "cudaEventRecord (copies)");
  copies_.push_back({ticket, done});
  return ticket;
}

CopyTicket CudaBackend::CopyToHostAsync(void* host_dst, const void* src,
                                        size_t bytes) {
  return EnqueueCopy(host_dst, src, bytes, cudaMemcpyDeviceToHost);
}

CopyTicket CudaBackend::CopyToDeviceAsync(void* dst, const void* host_src,
                                          size_t bytes) {
  return EnqueueCopy(dst, host_src, bytes, cudaMemcpyHostToDevice);
}

void CudaBackend::RetireCopies() {
  while (!copies_.empty()) {
    const cudaError_t e = cudaEventQuery(copies_.front().done);
    if (e == cudaErrorNotReady) return;
    // A failed copy is over too; its error is the next step's.
    Check(e, "cudaEventQuery (copies)");
    done_ticket_ = copies_.front().ticket;
    spare_copy_events_.push_back(copies_.front().done);
    copies_.pop_front();
  }
}

bool CudaBackend::CopyDone(CopyTicket ticket) {
  if (ticket <= done_ticket_) return true;
  UseDevice();
  RetireCopies();
  return ticket <= done_ticket_;
}

void CudaBackend::WaitCopy(CopyTicket ticket) {
  if (ticket <= done_ticket_) return;
  UseDevice();
  for (const Copy& c : copies_) {
    if (c.ticket < ticket) continue;
    Check(cudaEventSynchronize(c.done), "cudaEventSynchronize (copies)");
    break;
  }
  RetireCopies();
}

void CudaBackend::DestroyCopyQueue() {
  if (copy_stream_ != nullptr) cudaStreamSynchronize(copy_stream_);
  for (const Copy& c : copies_) cudaEventDestroy(c.done);
  copies_.clear();
  for (cudaEvent_t e : spare_copy_events_) cudaEventDestroy(e);
  spare_copy_events_.clear();
  if (ops_mark_ != nullptr) cudaEventDestroy(ops_mark_);
  if (copy_stream_ != nullptr) cudaStreamDestroy(copy_stream_);
  copy_stream_ = nullptr;
  ops_mark_ = nullptr;
}

}  // namespace seqboat::cuda
