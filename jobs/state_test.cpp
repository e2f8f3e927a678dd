#include "jobs/state.hpp"

#include <gtest/gtest.h>

#include <set>
#include <tuple>

namespace railyard::jobs {
namespace {

using S = JobState;
using E = JobEvent;

constexpr std::array<S, 11> kAllStates = {S::kPending,   S::kHeld,     S::kStarting,  S::kRunning,
                                          S::kCompleted, S::kFailed,   S::kCancelled, S::kTimeout,
                                          S::kNodeFail,  S::kPreempted, S::kOutOfMemory};
constexpr std::array<E, 12> kAllEvents = {
    E::kPlaced,     E::kAllRanksRunning, E::kExitedOk, E::kExitedFail, E::kCancelled,   E::kTimedOut,
    E::kNodeFailed, E::kPreempted,       E::kRequeued, E::kHeld,       E::kReleased,    E::kOutOfMemory};

// The whole allowed table, written out independently of state.cpp.
const std::set<std::tuple<S, E, S>> kExpected = {
    {S::kPending, E::kPlaced, S::kStarting},      {S::kPending, E::kHeld, S::kHeld},
    {S::kPending, E::kCancelled, S::kCancelled},  {S::kHeld, E::kReleased, S::kPending},
    {S::kHeld, E::kCancelled, S::kCancelled},     {S::kStarting, E::kAllRanksRunning, S::kRunning},
    {S::kStarting, E::kExitedOk, S::kCompleted},  {S::kStarting, E::kExitedFail, S::kFailed},
    {S::kStarting, E::kCancelled, S::kCancelled}, {S::kStarting, E::kTimedOut, S::kTimeout},
    {S::kStarting, E::kOutOfMemory, S::kOutOfMemory}, {S::kRunning, E::kOutOfMemory, S::kOutOfMemory},
    {S::kStarting, E::kNodeFailed, S::kNodeFail}, {S::kStarting, E::kPreempted, S::kPreempted},
    {S::kStarting, E::kRequeued, S::kPending},    {S::kRunning, E::kExitedOk, S::kCompleted},
    {S::kRunning, E::kExitedFail, S::kFailed},    {S::kRunning, E::kCancelled, S::kCancelled},
    {S::kRunning, E::kTimedOut, S::kTimeout},     {S::kRunning, E::kNodeFailed, S::kNodeFail},
    {S::kRunning, E::kPreempted, S::kPreempted},  {S::kRunning, E::kRequeued, S::kPending},
    {S::kFailed, E::kRequeued, S::kPending},      {S::kNodeFail, E::kRequeued, S::kPending},
    {S::kPreempted, E::kRequeued, S::kPending},
};

TEST(JobStateMachine, EveryStateEventPairMatchesTheTable) {
  for (S from : kAllStates) {
    for (E ev : kAllEvents) {
      auto r = transition(from, ev);
      bool allowed = false;
      for (const auto& [f, e, to] : kExpected) {
        if (f != from || e != ev) continue;
        allowed = true;
        ASSERT_TRUE(r) << to_string(from) << " + " << to_string(ev);
        EXPECT_EQ(*r, to) << to_string(from) << " + " << to_string(ev);
      }
      if (allowed) continue;
      ASSERT_FALSE(r) << to_string(from) << " + " << to_string(ev) << " should be refused";
      EXPECT_EQ(r.error().code, ErrorCode::kConflict);
    }
  }
  EXPECT_EQ(state_transitions().size(), kExpected.size());
}

TEST(JobStateMachine, CanTransitionAgreesWithTransition) {
  for (S from : kAllStates) {
    for (S to : kAllStates) {
      bool expected = false;
      for (const auto& [f, e, t] : kExpected) expected = expected || (f == from && t == to);
      EXPECT_EQ(can_transition(from, to), expected) << to_string(from) << " -> " << to_string(to);
    }
  }
}

TEST(JobStateMachine, ForbiddenSample) {
  EXPECT_FALSE(can_transition(S::kPending, S::kRunning));    // must start first
  EXPECT_FALSE(can_transition(S::kHeld, S::kStarting));      // release first
  EXPECT_FALSE(can_transition(S::kRunning, S::kHeld));       // only pending jobs are held
  EXPECT_FALSE(can_transition(S::kCompleted, S::kPending));  // success is final
  EXPECT_FALSE(can_transition(S::kCancelled, S::kPending));  // a cancel is final
  EXPECT_FALSE(can_transition(S::kTimeout, S::kPending));    // TIMEOUT is not requeued
  EXPECT_FALSE(can_transition(S::kCompleted, S::kFailed));
  EXPECT_FALSE(can_transition(S::kPending, S::kPending));  // no self transitions
  EXPECT_FALSE(can_transition(S::kRunning, S::kRunning));
  auto r = transition(S::kRunning, E::kPlaced);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().message, "event placed does not apply to a RUNNING job");
}

TEST(JobStateMachine, TerminalStatesOnlyLeaveByRequeue) {
  for (S from : kAllStates) {
    if (!is_terminal(from)) continue;
    for (E ev : kAllEvents) {
      auto r = transition(from, ev);
      if (r) {
        EXPECT_EQ(ev, E::kRequeued) << to_string(from);
        EXPECT_EQ(*r, S::kPending);
      }
    }
  }
}

TEST(JobStateMachine, EventNamesRoundTrip) {
  std::set<std::string_view> names;
  for (E ev : kAllEvents) {
    names.insert(to_string(ev));
    EXPECT_EQ(parse_event(to_string(ev)), ev);
  }
  EXPECT_EQ(names.size(), kAllEvents.size());
  EXPECT_FALSE(parse_event("exploded"));
}

TEST(JobStateMachine, ALifeWithPreemptionAndRequeue) {
  S s = S::kPending;
  for (E ev : {E::kHeld, E::kReleased, E::kPlaced, E::kAllRanksRunning, E::kPreempted, E::kRequeued,
               E::kPlaced, E::kAllRanksRunning, E::kExitedOk}) {
    auto r = transition(s, ev);
    ASSERT_TRUE(r) << to_string(s) << " + " << to_string(ev);
    s = *r;
  }
  EXPECT_EQ(s, S::kCompleted);
}

}  // namespace
}  // namespace railyard::jobs
