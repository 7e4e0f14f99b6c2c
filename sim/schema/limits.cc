#include "sim/schema/limits.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "google/protobuf/stubs/common.h"

namespace shardsim {

std::string Num(double v) { return absl::StrFormat("%.10g", v); }

FieldCheck::FieldCheck(absl::string_view where, absl::string_view prefix)
    : where_(where), prefix_(prefix) {}

void FieldCheck::Fail(absl::string_view field, absl::string_view why) {
  if (!status_.ok()) return;  // the first failure is the one reported
  // Without a place, the caller names it ("FILE: field model: ...").
  status_ = absl::InvalidArgumentError(
      where_.empty()
          ? absl::StrCat(prefix_, field, ": ", why)
          : absl::StrCat(where_, ": field ", prefix_, field, ": ", why));
}

FieldCheck& FieldCheck::Count(absl::string_view field, int64_t value,
                              int64_t lo, int64_t hi) {
  if (value < lo || value > hi) {
    Fail(field, absl::StrCat("must be in [", lo, ", ", hi, "], got ", value));
  }
  return *this;
}

FieldCheck& FieldCheck::Real(absl::string_view field, double value, double lo,
                             double hi) {
  // Written so that NaN fails: every comparison with it is false.
  if (!(value >= lo && value <= hi)) {
    Fail(field, absl::StrCat("must be a finite number in [", Num(lo), ", ",
                             Num(hi), "], got ", Num(value)));
  }
  return *this;
}

FieldCheck& FieldCheck::Share(absl::string_view field, double value) {
  if (!(value > 0 && value <= 1)) {
    Fail(field, absl::StrCat("must be in (0, 1], got ", Num(value)));
  }
  return *this;
}

FieldCheck& FieldCheck::Text(absl::string_view field, absl::string_view value) {
  if (value.size() > 4096) {
    Fail(field, absl::StrCat("must be at most 4096 bytes, got ", value.size()));
  } else if (!google::protobuf::internal::IsStructurallyValidUTF8(
                 value.data(), static_cast<int>(value.size()))) {
    Fail(field, "must be valid UTF-8");
  }
  return *this;
}

FieldCheck& FieldCheck::Rule(absl::string_view field, bool holds,
                             absl::string_view why) {
  if (!holds) Fail(field, why);
  return *this;
}

absl::Status CheckedMul(int64_t a, int64_t b, absl::string_view what,
                        int64_t* out) {
  int64_t product = 0;
  if (a < 0 || b < 0 || __builtin_mul_overflow(a, b, &product)) {
    return absl::OutOfRangeError(
        absl::StrCat(what, ": ", a, " x ", b, " does not fit in 64 bits"));
  }
  *out = product;
  return absl::OkStatus();
}

}  // namespace shardsim
