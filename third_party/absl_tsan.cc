// Linked into every binary of --config=tsan (through //third_party:absl):
// tells ThreadSanitizer what Abseil's synchronization does. Debian builds
// libabsl_synchronization without TSan, so absl::Mutex, CondVar and
// Notification synchronize through code TSan cannot see, and every field an
// absl::Mutex guards would be reported as a race. Each function below
// interposes the library's (the executable's definition wins over a shared
// library's, for gRPC's calls too), wraps the real one, found with
// dlsym(RTLD_NEXT), in TSan's mutex annotations, and runs it. Between a
// pre_ and a post_ annotation TSan ignores the thread's memory accesses, so
// absl evaluating a waiter's Condition inside another thread's Unlock is not
// taken for an unsynchronized read.
#include <dlfcn.h>
#include <sanitizer/tsan_interface.h>

#include <cstdio>
#include <cstdlib>
#include <string_view>

#include "absl/base/options.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"

#define SEQBOAT_STRINGIFY_INNER(x) #x
#define SEQBOAT_STRINGIFY(x) SEQBOAT_STRINGIFY_INNER(x)

// The mangled names below spell Abseil's inline namespace.
static_assert(std::string_view(SEQBOAT_STRINGIFY(
                  ABSL_OPTION_INLINE_NAMESPACE_NAME)) == "debian3",
              "Abseil's ABI namespace changed: update the mangled names");

namespace {

template <typename Fn>
Fn Real(const char* mangled) {
  void* fn = dlsym(RTLD_NEXT, mangled);
  if (fn == nullptr) {
    std::fprintf(stderr, "absl_tsan: %s not found: %s\n", mangled, dlerror());
    std::abort();
  }
  return reinterpret_cast<Fn>(fn);
}

#define REAL(type, mangled) static const auto real = Real<type>(mangled)

using absl::Condition;
using absl::CondVar;
using absl::Duration;
using absl::Mutex;
using absl::Notification;
using absl::Time;

constexpr unsigned kRead = __tsan_mutex_read_lock;
constexpr unsigned kTry = __tsan_mutex_try_lock;

// Abseil's functions call one another through the same interposed symbols
// (AwaitWithTimeout calls AwaitWithDeadline, Notify locks a Mutex): only the
// outermost call on a thread is annotated.
thread_local int nesting = 0;

template <typename Call>
auto Inner(Call call) {
  ++nesting;
  auto result = call();
  --nesting;
  return result;
}

template <typename Call>
auto Locking(Mutex* mu, unsigned flags, Call call) {
  if (nesting > 0) return call();
  __tsan_mutex_pre_lock(mu, flags);
  auto result = Inner(call);
  __tsan_mutex_post_lock(mu, flags, 0);
  return result;
}

// For TryLock: the result says whether it is held.
template <typename Call>
bool MaybeLocking(Mutex* mu, unsigned flags, Call call) {
  if (nesting > 0) return call();
  __tsan_mutex_pre_lock(mu, flags | kTry);
  const bool held = Inner(call);
  __tsan_mutex_post_lock(
      mu, flags | kTry | (held ? 0u : __tsan_mutex_try_lock_failed), 0);
  return held;
}

template <typename Call>
auto Unlocking(Mutex* mu, unsigned flags, Call call) {
  if (nesting > 0) return call();
  __tsan_mutex_pre_unlock(mu, flags);
  auto result = Inner(call);
  __tsan_mutex_post_unlock(mu, flags);
  return result;
}

// Runs a function that is entered with `mu` held, releases it while waiting
// and holds it again on return (Await, CondVar::Wait): to TSan, an unlock
// then a lock.
template <typename Call>
auto ReleasedWhile(Mutex* mu, unsigned flags, Call call) {
  if (nesting > 0) return call();
  __tsan_mutex_pre_unlock(mu, flags);
  __tsan_mutex_post_unlock(mu, flags);
  __tsan_mutex_pre_lock(mu, flags);
  auto result = Inner(call);
  __tsan_mutex_post_lock(mu, flags, 0);
  return result;
}

}  // namespace

namespace absl {
ABSL_NAMESPACE_BEGIN

void Mutex::Lock() {
  REAL(void (*)(Mutex*), "_ZN4absl7debian35Mutex4LockEv");
  Locking(this, 0, [&] { return (real(this), 0); });
}

void Mutex::Unlock() {
  REAL(void (*)(Mutex*), "_ZN4absl7debian35Mutex6UnlockEv");
  Unlocking(this, 0, [&] { return (real(this), 0); });
}

bool Mutex::TryLock() {
  REAL(bool (*)(Mutex*), "_ZN4absl7debian35Mutex7TryLockEv");
  return MaybeLocking(this, 0, [&] { return real(this); });
}

void Mutex::ReaderLock() {
  REAL(void (*)(Mutex*), "_ZN4absl7debian35Mutex10ReaderLockEv");
  Locking(this, kRead, [&] { return (real(this), 0); });
}

void Mutex::ReaderUnlock() {
  REAL(void (*)(Mutex*), "_ZN4absl7debian35Mutex12ReaderUnlockEv");
  Unlocking(this, kRead, [&] { return (real(this), 0); });
}

bool Mutex::ReaderTryLock() {
  REAL(bool (*)(Mutex*), "_ZN4absl7debian35Mutex13ReaderTryLockEv");
  return MaybeLocking(this, kRead, [&] { return real(this); });
}

void Mutex::LockWhen(const Condition& cond) {
  REAL(void (*)(Mutex*, const Condition&),
       "_ZN4absl7debian35Mutex8LockWhenERKNS0_9ConditionE");
  Locking(this, 0, [&] { return (real(this, cond), 0); });
}

void Mutex::ReaderLockWhen(const Condition& cond) {
  REAL(void (*)(Mutex*, const Condition&),
       "_ZN4absl7debian35Mutex14ReaderLockWhenERKNS0_9ConditionE");
  Locking(this, kRead, [&] { return (real(this, cond), 0); });
}

// The timed LockWhens hold the mutex on return whether or not the condition
// became true.
bool Mutex::LockWhenWithTimeout(const Condition& cond, Duration timeout) {
  REAL(bool (*)(Mutex*, const Condition&, Duration),
       "_ZN4absl7debian35Mutex19LockWhenWithTimeoutERKNS0_9ConditionENS0_"
       "8DurationE");
  return Locking(this, 0, [&] { return real(this, cond, timeout); });
}

bool Mutex::LockWhenWithDeadline(const Condition& cond, Time deadline) {
  REAL(bool (*)(Mutex*, const Condition&, Time),
       "_ZN4absl7debian35Mutex20LockWhenWithDeadlineERKNS0_9ConditionENS0_"
       "4TimeE");
  return Locking(this, 0, [&] { return real(this, cond, deadline); });
}

bool Mutex::ReaderLockWhenWithTimeout(const Condition& cond, Duration timeout) {
  REAL(bool (*)(Mutex*, const Condition&, Duration),
       "_ZN4absl7debian35Mutex25ReaderLockWhenWithTimeoutERKNS0_9ConditionENS0_"
       "8DurationE");
  return Locking(this, kRead, [&] { return real(this, cond, timeout); });
}

bool Mutex::ReaderLockWhenWithDeadline(const Condition& cond, Time deadline) {
  REAL(bool (*)(Mutex*, const Condition&, Time),
       "_ZN4absl7debian35Mutex26ReaderLockWhenWithDeadlineERKNS0_"
       "9ConditionENS0_4TimeE");
  return Locking(this, kRead, [&] { return real(this, cond, deadline); });
}

void Mutex::Await(const Condition& cond) {
  REAL(void (*)(Mutex*, const Condition&),
       "_ZN4absl7debian35Mutex5AwaitERKNS0_9ConditionE");
  ReleasedWhile(this, 0, [&] { return (real(this, cond), 0); });
}

bool Mutex::AwaitWithTimeout(const Condition& cond, Duration timeout) {
  REAL(bool (*)(Mutex*, const Condition&, Duration),
       "_ZN4absl7debian35Mutex16AwaitWithTimeoutERKNS0_9ConditionENS0_"
       "8DurationE");
  return ReleasedWhile(this, 0, [&] { return real(this, cond, timeout); });
}

bool Mutex::AwaitWithDeadline(const Condition& cond, Time deadline) {
  REAL(bool (*)(Mutex*, const Condition&, Time),
       "_ZN4absl7debian35Mutex17AwaitWithDeadlineERKNS0_9ConditionENS0_4TimeE");
  return ReleasedWhile(this, 0, [&] { return real(this, cond, deadline); });
}

void CondVar::Wait(Mutex* mu) {
  REAL(void (*)(CondVar*, Mutex*),
       "_ZN4absl7debian37CondVar4WaitEPNS0_5MutexE");
  ReleasedWhile(mu, 0, [&] { return (real(this, mu), 0); });
}

bool CondVar::WaitWithTimeout(Mutex* mu, Duration timeout) {
  REAL(bool (*)(CondVar*, Mutex*, Duration),
       "_ZN4absl7debian37CondVar15WaitWithTimeoutEPNS0_5MutexENS0_8DurationE");
  return ReleasedWhile(mu, 0, [&] { return real(this, mu, timeout); });
}

bool CondVar::WaitWithDeadline(Mutex* mu, Time deadline) {
  REAL(bool (*)(CondVar*, Mutex*, Time),
       "_ZN4absl7debian37CondVar16WaitWithDeadlineEPNS0_5MutexENS0_4TimeE");
  return ReleasedWhile(mu, 0, [&] { return real(this, mu, deadline); });
}

// What happened before Notify() happens before a wait that returns true.
void Notification::Notify() {
  REAL(void (*)(Notification*), "_ZN4absl7debian312Notification6NotifyEv");
  __tsan_release(this);
  Inner([&] { return (real(this), 0); });
}

void Notification::WaitForNotification() const {
  REAL(void (*)(const Notification*),
       "_ZNK4absl7debian312Notification19WaitForNotificationEv");
  Inner([&] { return (real(this), 0); });
  __tsan_acquire(const_cast<Notification*>(this));
}

bool Notification::WaitForNotificationWithTimeout(Duration timeout) const {
  REAL(bool (*)(const Notification*, Duration),
       "_ZNK4absl7debian312Notification30WaitForNotificationWithTimeoutENS0_"
       "8DurationE");
  const bool notified = Inner([&] { return real(this, timeout); });
  if (notified) __tsan_acquire(const_cast<Notification*>(this));
  return notified;
}

bool Notification::WaitForNotificationWithDeadline(Time deadline) const {
  REAL(bool (*)(const Notification*, Time),
       "_ZNK4absl7debian312Notification31WaitForNotificationWithDeadlineENS0_"
       "4TimeE");
  const bool notified = Inner([&] { return real(this, deadline); });
  if (notified) __tsan_acquire(const_cast<Notification*>(this));
  return notified;
}

ABSL_NAMESPACE_END
}  // namespace absl
