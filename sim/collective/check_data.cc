#include "sim/collective/check_data.h"

#include <algorithm>

namespace shardsim {

CheckValues CheckValues::Exact() {
  CheckValues v;
  v.member_scale = 1000003;
  v.element_scale = 7;
  v.offset = 1;
  v.poison = -999999937;
  return v;
}

CheckValues CheckValues::Float32(int p) {
  const int64_t pp = static_cast<int64_t>(p) * p;
  CheckValues v;
  v.member_scale = 1;
  v.element_scale = p;
  v.offset = 0;
  v.period = std::max<int64_t>(1, (int64_t{1} << 24) / pp);
  v.poison = -1;
  return v;
}

DataCheck::DataCheck(CollectiveOp op, int p, int root, int64_t n,
                     CheckValues values)
    : op_(op), p_(p), root_(root), n_(n), v_(values) {}

bool DataCheck::Supports(CollectiveOp op) {
  return op == ALL_GATHER || op == REDUCE_SCATTER || op == ALL_REDUCE ||
         op == BROADCAST;
}

bool DataCheck::IsInput(int member, int64_t e) const {
  switch (op_) {
    case REDUCE_SCATTER:
    case ALL_REDUCE:
      return true;
    case ALL_GATHER: {
      const Range own = ChunkRange(n_, p_, member);
      return e >= own.offset && e < own.offset + own.count;
    }
    case BROADCAST:
      return member == root_;
    default:
      return false;
  }
}

int64_t DataCheck::InputValue(int member, int64_t e) const {
  return int64_t{member + 1} * v_.member_scale +
         (e % v_.period) * v_.element_scale + v_.offset;
}

int64_t DataCheck::InitialValue(int member, int64_t e) const {
  return IsInput(member, e) ? InputValue(member, e) : v_.poison;
}

int DataCheck::OwnerOf(int64_t e) const {
  const int64_t base = n_ / p_;
  const int64_t extra = n_ % p_;  // the first `extra` chunks hold base + 1
  const int64_t big = extra * (base + 1);
  if (e < big) return static_cast<int>(e / (base + 1));
  return static_cast<int>(extra + (e - big) / base);
}

bool DataCheck::IsChecked(int member, int64_t e) const {
  if (!Supports(op_)) return false;
  return op_ != REDUCE_SCATTER || OwnerOf(e) == member;
}

int64_t DataCheck::ExpectedValue(int /*member*/, int64_t e) const {
  return Expected(OwnerOf(e), e);
}

int64_t DataCheck::Expected(int owner, int64_t e) const {
  switch (op_) {
    case ALL_GATHER:
      return InputValue(owner, e);
    case REDUCE_SCATTER:
    case ALL_REDUCE: {
      // The sum over members m of InputValue(m, e).
      const int64_t p = p_;
      return v_.member_scale * (p * (p + 1) / 2) +
             p * ((e % v_.period) * v_.element_scale + v_.offset);
    }
    case BROADCAST:
      return InputValue(root_, e);
    default:
      return 0;
  }
}

}  // namespace shardsim
