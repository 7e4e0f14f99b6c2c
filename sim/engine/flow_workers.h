// Flows on the fabric, started and waited in batches by a pool of worker
// actors: what every stage of a collective and every point-to-point send
// runs its bytes as (collective_engine.h).
//
// SimGrid 3.32 keeps the flows an actor has in flight in a list that every
// completion walks (ActorImpl::activities_, a std::list it remove()s from),
// so one actor waiting on n flows pays n^2/2. Flows are started and waited
// in batches of kBatch, each by one of a pool of worker actors: creating an
// actor per batch costs more than the list (a context and its stack).
//
// A flow is a put to a mailbox with a permanent receiver: SimGrid starts
// such a comm at once, without a get, from the sender's host to the
// receiver's (CommImpl::isend, CommImpl::start). So the worker moves itself
// to the flow's source and its receiver to the destination before each put;
// moves are instant. Each is a simcall, during which other actors run: so
// a batch has a receiver of its own. Host-to-host comms (Comm::sendto) would
// need no moves, but 3.32 detaches them, and the end of each detached comm
// walks a list of every one in flight (the maestro's activities_): O(flows in
// flight) per end, 85% of a 16,384-GPU step and 60% of a 1,024-GPU ZeRO++
// one. Puts are waited by their worker, so their ends walk its short list.
#ifndef SHARDSIM_SIM_ENGINE_FLOW_WORKERS_H_
#define SHARDSIM_SIM_ENGINE_FLOW_WORKERS_H_

#include <simgrid/forward.h>

#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <vector>

#include "sim/engine/fabric.h"

namespace shardsim {

// One flow: all of a hop's bytes (fast mode), or a send's.
struct Flow {
  simgrid::s4u::Host* from;
  simgrid::s4u::Host* to;
  uint64_t bytes;
  simgrid::s4u::CommPtr comm;  // once started
  double finish = 0;           // when its last byte arrived
  bool nvswitch = false;       // on NVSwitch ports (Fabric::OpenNvlink)
};

class FlowWorkers {
 public:
  static constexpr size_t kBatch = 32;

  // From an actor.
  explicit FlowWorkers(Fabric* fabric);

  // Flows started together and not all done yet.
  struct Join {
    Join();
    int pending = 0;
    simgrid::s4u::ConditionVariablePtr done;
  };

  // From an actor: starts every flow at once, returns when all are done.
  // `on_end`, if given, is called as each flow ends (at its end).
  void Run(std::vector<Flow>* flows,
           const std::function<void()>& on_end = nullptr);

  // From an actor: starts every flow at once; Wait(join) returns when they
  // are done. `flows` and `on_end` (may be null) must outlive the wait.
  void Start(std::vector<Flow>* flows, const std::function<void()>* on_end,
             Join* join);
  void Wait(Join* join);

 private:
  struct Batch {
    std::vector<Flow>* flows;
    size_t first;
    size_t last;
    const std::function<void()>* on_end;
    Join* join;
  };
  // A mailbox and its permanent receiver, used by one batch at a time.
  struct Box {
    simgrid::s4u::Mailbox* mailbox;
    simgrid::s4u::ActorPtr receiver;
  };

  // `on_end`: null, or empty, for none.
  void RunBatch(std::vector<Flow>* flows, size_t first, size_t last,
                const std::function<void()>* on_end);
  // Between two simcalls one actor runs alone: the free list needs no lock.
  Box TakeBox();
  // `box`'s flows are all done. A permanent receiver's mailbox keeps the
  // comms it was sent for a get that never comes: clear() drops them.
  void GiveBack(const Box& box);
  static void Park();
  void Work();

  Fabric* const fabric_;
  simgrid::s4u::MutexPtr mutex_;
  simgrid::s4u::ConditionVariablePtr work_;
  std::deque<Batch> queue_;
  int idle_ = 0;  // workers not running a batch
  std::vector<Box> free_boxes_;
  int boxes_ = 0;  // mailboxes made
};

}  // namespace shardsim

#endif  // SHARDSIM_SIM_ENGINE_FLOW_WORKERS_H_
