#include "sim/engine/flow_workers.h"

#include <algorithm>
#include <simgrid/s4u.hpp>

#include "absl/strings/str_cat.h"

namespace sg4 = simgrid::s4u;

namespace shardsim {

FlowWorkers::FlowWorkers(Fabric* fabric)
    : fabric_(fabric),
      mutex_(sg4::Mutex::create()),
      work_(sg4::ConditionVariable::create()) {}

FlowWorkers::Join::Join() : done(sg4::ConditionVariable::create()) {}

void FlowWorkers::Run(std::vector<Flow>* flows,
                      const std::function<void()>& on_end) {
  if (flows->size() <= kBatch) {
    RunBatch(flows, 0, flows->size(), &on_end);
    return;
  }
  Join join;
  Start(flows, &on_end, &join);
  Wait(&join);
}

void FlowWorkers::Start(std::vector<Flow>* flows,
                        const std::function<void()>* on_end, Join* join) {
  std::unique_lock<sg4::Mutex> lock(*mutex_);
  for (size_t first = 0; first < flows->size(); first += kBatch) {
    queue_.push_back(
        {flows, first, std::min(flows->size(), first + kBatch), on_end, join});
    ++join->pending;
  }
  // Every batch queued must find a worker now: one that waits for its
  // turn would start its flows late. Several calls can queue batches at
  // one instant before any worker wakes, so the count is of the queue.
  // Workers that finish a batch go back to the queue; daemons, so that
  // the simulation ends when the last real actor does.
  while (idle_ < static_cast<int>(queue_.size())) {
    sg4::Actor::create("flows", sg4::this_actor::get_host(), [this] {
      Work();
    })->daemonize();
    ++idle_;  // idle from its creation: it takes a batch when it runs
  }
  work_->notify_all();
}

void FlowWorkers::Wait(Join* join) {
  std::unique_lock<sg4::Mutex> lock(*mutex_);
  join->done->wait(lock, [&] { return join->pending == 0; });
}

void FlowWorkers::RunBatch(std::vector<Flow>* flows, size_t first, size_t last,
                           const std::function<void()>* on_end) {
  static char payload;  // a put must carry one; nothing reads it
  const Box box = TakeBox();
  sg4::Host* const home = sg4::this_actor::get_host();
  std::vector<sg4::CommPtr> comms;
  bool open = false;
  for (size_t i = first; i < last; ++i) {
    Flow& f = (*flows)[i];
    box.receiver->set_host(f.to);
    sg4::this_actor::set_host(f.from);
    if (f.nvswitch && !open) {
      fabric_->OpenNvlink();
      open = true;
    }
    comms.push_back(box.mailbox->put_async(&payload, f.bytes));
    f.comm = comms.back();
  }
  if (open) fabric_->CloseNvlink();
  sg4::this_actor::set_host(home);  // started flows keep their route
  if (on_end == nullptr || !*on_end) {
    for (size_t i = first; i < last; ++i) {
      comms[i - first]->wait();
      (*flows)[i].finish = comms[i - first]->get_finish_time();
    }
  } else {
    // In the order they end, so that on_end sees each end when it happens.
    std::vector<size_t> index(comms.size());
    for (size_t j = 0; j < index.size(); ++j) index[j] = first + j;
    while (!comms.empty()) {
      const size_t j = static_cast<size_t>(sg4::Comm::wait_any(comms));
      (*flows)[index[j]].finish = comms[j]->get_finish_time();
      (*on_end)();
      comms[j] = comms.back();
      comms.pop_back();
      index[j] = index.back();
      index.pop_back();
    }
  }
  GiveBack(box);
}

FlowWorkers::Box FlowWorkers::TakeBox() {
  if (free_boxes_.empty()) {
    // Named by owner: mailboxes outlive it, and SimGrid's are global.
    Box box{sg4::Mailbox::by_name(
                absl::StrCat("flows ", absl::Hex(this), " ", boxes_++)),
            sg4::Actor::create("flow ends", sg4::this_actor::get_host(),
                               [] { Park(); })};
    // A daemon, so that the simulation ends when the last real actor
    // does. SimGrid would suspend a comm whose receiver is suspended, so
    // it blocks on a condition nobody signals instead.
    box.receiver->daemonize();
    box.mailbox->set_receiver(box.receiver);
    return box;
  }
  Box box = free_boxes_.back();
  free_boxes_.pop_back();
  return box;
}

void FlowWorkers::GiveBack(const Box& box) {
  box.mailbox->clear();
  free_boxes_.push_back(box);
}

void FlowWorkers::Park() {
  sg4::MutexPtr mutex = sg4::Mutex::create();
  sg4::ConditionVariablePtr never = sg4::ConditionVariable::create();
  std::unique_lock<sg4::Mutex> lock(*mutex);
  for (;;) never->wait(lock);
}

void FlowWorkers::Work() {
  std::unique_lock<sg4::Mutex> lock(*mutex_);
  for (;;) {
    work_->wait(lock, [this] { return !queue_.empty(); });
    --idle_;
    const Batch b = queue_.front();
    queue_.pop_front();
    lock.unlock();
    RunBatch(b.flows, b.first, b.last, b.on_end);
    lock.lock();
    ++idle_;
    if (--b.join->pending == 0) b.join->done->notify_all();
  }
}

}  // namespace shardsim
