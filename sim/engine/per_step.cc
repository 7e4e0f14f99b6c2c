// The per-step mode (collective_engine.h): every message of every step of
// a plan is a flow, started once the data it sends has arrived. For
// checking the fast mode.
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <simgrid/s4u.hpp>
#include <tuple>
#include <utility>
#include <vector>

#include "sim/collective/wire_bytes.h"
#include "sim/engine/collective_engine.h"

namespace sg4 = simgrid::s4u;

namespace shardsim {

namespace {

// One message of the per-step mode: the transfers of one step with the same
// channel, source and destination (plan.h: one message cut into ranges).
struct Message {
  int src = 0;
  int dst = 0;
  int64_t elements = 0;
  std::vector<int> next;  // messages that need this one's data
  int waiting = 0;        // messages whose data this one needs
};

// The plan's messages and their data dependencies. A message is what one
// pair sends on one channel in one step (plan.h); it needs every earlier
// transfer into its sender that overlaps what it sends, and the previous
// step's messages on its own connection (an NCCL channel carries its steps
// one after another). The switch is member p.
std::vector<Message> DataflowMessages(const Plan& plan) {
  const std::vector<Transfer> transfers = ExpandTransfers(plan);  // by step
  const int p = plan.shape.size();
  auto who = [p](int member) { return member == kSwitch ? p : member; };
  using Connection = std::tuple<int, int, int>;  // channel, src, dst
  std::map<std::tuple<int, int, int, int>, int> id;
  std::vector<Message> msgs;
  std::vector<std::set<int>> needs;  // per message, earlier messages
  std::vector<int> msg_of(transfers.size());
  std::vector<std::vector<size_t>> into(p + 1);       // transfers into a member
  std::map<Connection, std::pair<int, int>> last_on;  // step, message
  for (size_t i = 0; i < transfers.size(); ++i) {
    const Transfer& t = transfers[i];
    auto [it, fresh] = id.try_emplace({t.step, t.channel, t.src, t.dst},
                                      static_cast<int>(msgs.size()));
    const int m = it->second;
    if (fresh) {
      msgs.push_back({t.src, t.dst, 0, {}, 0});
      needs.emplace_back();
      const Connection c{t.channel, t.src, t.dst};
      if (auto prev = last_on.find(c); prev != last_on.end()) {
        needs[m].insert(prev->second.second);
      }
      last_on[c] = {t.step, m};
    }
    for (size_t j : into[who(t.src)]) {
      const Transfer& in = transfers[j];
      if (in.step < t.step && in.offset < t.offset + t.count &&
          t.offset < in.offset + in.count) {
        needs[m].insert(msg_of[j]);
      }
    }
    msgs[m].elements += t.count;
    msg_of[i] = m;
    into[who(t.dst)].push_back(i);
  }
  for (size_t m = 0; m < msgs.size(); ++m) {
    for (int d : needs[m]) msgs[d].next.push_back(static_cast<int>(m));
    msgs[m].waiting = static_cast<int>(needs[m].size());
  }
  return msgs;
}

}  // namespace

void CollectiveEngine::RunPerStep(const Entry& e) {
  const std::vector<Message> plan_msgs = DataflowMessages(e.plan);
  int remaining = static_cast<int>(plan_msgs.size() * e.groups.size());
  sg4::MutexPtr mutex = sg4::Mutex::create();
  sg4::ConditionVariablePtr done = sg4::ConditionVariable::create();
  for (const std::vector<int>& group : e.groups) {
    auto msgs = std::make_shared<std::vector<Message>>(plan_msgs);
    // Launch(i): message i's flow, then its alpha, then whatever it unblocks.
    auto launch = std::make_shared<std::function<void(int)>>();
    *launch = [this, &e, &group, msgs, launch, &remaining, mutex, done](int i) {
      sg4::Actor::create(
          "message", sg4::this_actor::get_host(), [=, &e, &group, &remaining] {
            const Message& m = (*msgs)[i];
            const Route r = RouteOf(e, group, m.src, m.dst);
            const bool leaves = LeavesNode(e.shape, m.src, m.dst);
            const double bytes =
                leaves ? m.elements : m.elements * e.intra_inflation;
            if (!leaves) fabric_.OpenNvlink();
            sg4::CommPtr comm = sg4::Comm::sendto_async(
                r.from, r.to, WireBytes(bytes, *e.protocol));
            if (!leaves) fabric_.CloseNvlink();
            comm->wait();
            sg4::this_actor::sleep_for(r.alpha);
            for (int n : m.next) {
              if (--(*msgs)[n].waiting == 0) (*launch)(n);
            }
            std::unique_lock<sg4::Mutex> lock(*mutex);
            if (--remaining == 0) done->notify_all();
          });
    };
    for (int i = 0; i < static_cast<int>(msgs->size()); ++i) {
      if ((*msgs)[i].waiting == 0) (*launch)(i);
    }
  }
  std::unique_lock<sg4::Mutex> lock(*mutex);
  done->wait(lock, [&] { return remaining == 0; });
}

}  // namespace shardsim
