// Numpy broadcasting and the tiled single-pass evaluation loop.
//
// The output is walked in tiles of at most kTile elements that never straddle a row (the
// innermost merged axis, see MakeLayout), so every input is, per row, a contiguous run or one
// repeated value:
//  - long rows get tiles within one row: an input walking the row is a plain slice of its
//    tensor, and an input broadcast along the row is one value, filled once and kept while it
//    repeats;
//  - short rows get tiles of several whole rows, which amortise the per-tile work: inputs laid
//    out like the output are slices, inputs that repeat the same rows in every tile (a bias
//    over the last axis) are loaded once, and the rest are gathered row by row. Where an input
//    repeats one row over the next axis out but changes further out — a per-channel scale or
//    an SE gate over activations blocked by 8 channels, (C/8, HW, 8) against (C/8, 1, 8) —
//    tiles stay inside one plane of that axis, so the input is one repeated row per tile
//    instead of a gather of 8-element rows.
// Slices stored as the register's lane type (inputs, and every output) are used in place, which
// saves a pass through L1 per operand on bandwidth-bound programs.
#include <omp.h>

#include <algorithm>

#include "cpu_runtime/elementwise/internal.h"
#include "ir/broadcast.h"

namespace fusionopt::cpu::ew {

Result<std::vector<int64_t>> BroadcastDims(const std::vector<const RtTensor*>& inputs) {
  std::vector<std::vector<int64_t>> shapes;
  for (const RtTensor* input : inputs) shapes.push_back(input->dims());
  if (std::optional<std::vector<int64_t>> out = fusionopt::BroadcastDims(shapes)) return *out;
  std::string text;
  for (const RtTensor* each : inputs) text += (text.empty() ? "" : " and ") + DimsToString(each->dims());
  return InvalidModel("shapes " + text + " do not broadcast");
}

namespace {

// The output index space with each input's element strides (0 where it broadcasts), with
// adjacent axes merged wherever every input walks them contiguously.
struct Layout {
  std::vector<int64_t> dims;
  std::vector<std::vector<int64_t>> strides;  // per input, per axis
};

Layout MakeLayout(const std::vector<int64_t>& out_dims, const std::vector<const RtTensor*>& inputs) {
  Layout layout;
  std::vector<size_t> kept;
  for (size_t axis = 0; axis < out_dims.size(); ++axis) {
    if (out_dims[axis] != 1) kept.push_back(axis);
  }
  std::vector<std::vector<int64_t>> full(inputs.size());
  for (size_t k = 0; k < inputs.size(); ++k) {
    const RtTensor& input = *inputs[k];
    std::vector<int64_t> strides(out_dims.size(), 0);
    int64_t stride = 1;
    for (size_t i = input.rank(); i-- > 0;) {
      size_t axis = out_dims.size() - input.rank() + i;
      strides[axis] = input.dim(i) == 1 ? 0 : stride;
      stride *= input.dim(i);
    }
    full[k] = std::move(strides);
  }
  layout.strides.resize(inputs.size());
  for (size_t axis : kept) {
    bool merge = !layout.dims.empty();
    for (size_t k = 0; merge && k < inputs.size(); ++k) {
      merge = layout.strides[k].back() == full[k][axis] * out_dims[axis];
    }
    if (merge) {
      layout.dims.back() *= out_dims[axis];
      for (size_t k = 0; k < inputs.size(); ++k) layout.strides[k].back() = full[k][axis];
    } else {
      layout.dims.push_back(out_dims[axis]);
      for (size_t k = 0; k < inputs.size(); ++k) layout.strides[k].push_back(full[k][axis]);
    }
  }
  if (layout.dims.empty()) {  // a scalar result
    layout.dims.push_back(1);
    for (auto& strides : layout.strides) strides.push_back(0);
  }
  return layout;
}

// How a tile's values of one input reach its register.
enum class Access : uint8_t {
  kBind,    // a contiguous slice stored as the lane type: read in place
  kCopy,    // a contiguous slice stored as another type: converted into the register
  kFill,    // one value for the whole tile
  kRepeat,  // the same rows in every tile (a row-broadcast input): loaded once
  kRows,    // gathered row by row
};

struct InputAccess {
  Access access;
  int64_t inner_stride;  // elements per step along a row: 1 or 0
  size_t element_size;
};

struct OutputAccess {
  bool in_place;
  size_t element_size;
};

// Where one thread stands in one input.
struct InputCursor {
  int64_t row_offset = 0;  // the element at the start of the thread's current row
  // kFill/kRepeat: the element offset and length the register still holds, so that a value
  // repeated over consecutive tiles is filled once.
  int64_t filled_from = -1;
  int filled_count = 0;
};

// One thread's registers and row cursor.
struct Workspace {
  Workspace(const Program& program, int capacity, size_t rank)
      : regs(program, capacity), inputs(static_cast<size_t>(program.num_inputs)), index(rank, 0) {}

  TileRegisters regs;
  int64_t row = 0;                  // a row of the output
  std::vector<InputCursor> inputs;
  std::vector<int64_t> index;       // the row's index over the outer axes
};

// Decided once per evaluation: the tiling, and how each operand is reached.
class TilePlan {
 public:
  TilePlan(const Program& program, Layout layout, const std::vector<const RtTensor*>& inputs,
           const std::vector<RtTensor*>& outputs, int64_t total);

  int64_t tiles() const { return tiles_; }
  Workspace NewWorkspace() const;
  void Run(Workspace& workspace, int64_t tile) const;

 private:
  void PlanTiles();
  bool RepeatsWithinPlanes(size_t k) const;
  void PlanInputs();
  void PlanOutputs();
  void SeekRow(Workspace& workspace, int64_t row) const;
  void NextRow(Workspace& workspace) const;
  void LoadInput(Workspace& workspace, size_t k, int64_t begin, int n) const;
  void GatherRows(Workspace& workspace, int rows) const;

  const Program& program_;
  const Layout layout_;
  const std::vector<const RtTensor*>& inputs_;
  const std::vector<RtTensor*>& outputs_;
  int64_t total_;
  int64_t inner_;          // elements per row
  int64_t rows_;
  int64_t rows_per_tile_;  // 1: tiles within a row
  int64_t tiles_per_row_;  // > 1 only for rows longer than a tile
  // Tiles of whole rows never straddle a plane of this many rows (rows_ when unaligned).
  int64_t plane_rows_;
  int64_t tiles_per_plane_;
  bool plane_aligned_ = false;
  int tile_length_;        // elements of a full tile
  int64_t tiles_;
  std::vector<InputAccess> input_access_;
  std::vector<size_t> gathered_;     // inputs with Access::kRows
  std::vector<OutputAccess> output_access_;
  std::vector<Instr> hoisted_;       // constants, filled once per workspace
  std::vector<Instr> tile_code_;     // the rest of the program when constants are hoisted
};

TilePlan::TilePlan(const Program& program, Layout layout, const std::vector<const RtTensor*>& inputs,
                   const std::vector<RtTensor*>& outputs, int64_t total)
    : program_(program), layout_(std::move(layout)), inputs_(inputs), outputs_(outputs), total_(total) {
  PlanTiles();
  PlanInputs();
  PlanOutputs();
}

void TilePlan::PlanTiles() {
  inner_ = layout_.dims.back();
  rows_ = total_ / inner_;
  plane_rows_ = rows_;
  // Rows that fit in a tile twice or more are grouped into tiles of whole rows: measured on one
  // thread with [rows, inner] + [inner] and + [rows, 1], tiles of 64 to 256 elements cost more
  // in per-tile work than the grouped rows cost in gathering.
  rows_per_tile_ = std::min<int64_t>(kTile / inner_, rows_);
  if (rows_per_tile_ >= 2) {
    tiles_per_row_ = 1;
    for (size_t k = 0; k < inputs_.size() && !plane_aligned_; ++k) plane_aligned_ = RepeatsWithinPlanes(k);
    if (plane_aligned_) {
      plane_rows_ = layout_.dims[layout_.dims.size() - 2];
      rows_per_tile_ = std::min(rows_per_tile_, plane_rows_);
    }
    tile_length_ = static_cast<int>(rows_per_tile_ * inner_);
    tiles_per_plane_ = (plane_rows_ + rows_per_tile_ - 1) / rows_per_tile_;
    tiles_ = rows_ / plane_rows_ * tiles_per_plane_;
    return;
  }
  // Equal tiles per row, a multiple of 16 lanes long, rather than full tiles and a remnant.
  rows_per_tile_ = 1;
  int64_t per_row = (inner_ + kTile - 1) / kTile;
  int64_t length = ((inner_ + per_row - 1) / per_row + 15) / 16 * 16;
  tile_length_ = static_cast<int>(std::min(length, inner_));
  tiles_per_row_ = (inner_ + tile_length_ - 1) / tile_length_;
  tiles_per_plane_ = tiles_ = rows_ * tiles_per_row_;
}

// Whether input `k` would be gathered row by row from tiles of whole rows across planes, but
// holds one row (or one value) throughout each plane of the axis next to the rows.
bool TilePlan::RepeatsWithinPlanes(size_t k) const {
  const std::vector<int64_t>& strides = layout_.strides[k];
  if (strides.size() < 3 || strides[strides.size() - 2] != 0) return false;
  return std::any_of(strides.begin(), strides.end() - 2, [](int64_t s) { return s != 0; });
}

void TilePlan::PlanInputs() {
  std::vector<int64_t> dense(layout_.dims.size(), 1);
  for (size_t axis = dense.size() - 1; axis-- > 0;) dense[axis] = dense[axis + 1] * layout_.dims[axis + 1];
  bool whole_rows = rows_per_tile_ > 1;
  for (size_t k = 0; k < inputs_.size(); ++k) {
    const std::vector<int64_t>& strides = layout_.strides[k];
    int64_t inner_stride = strides.back();
    // The same row in every row of a tile: over all outer axes, or over the plane's rows.
    bool same_every_row = plane_aligned_ ? strides[strides.size() - 2] == 0
                                         : std::all_of(strides.begin(), strides.end() - 1, [](int64_t s) { return s == 0; });
    Lane lane = *LaneOf(program_.register_dtypes[k]);
    size_t size = static_cast<size_t>(ByteSizeOf(inputs_[k]->dtype(), 1));
    Access access;
    if (whole_rows ? strides == dense : inner_stride == 1) {
      access = StoredAsLane(inputs_[k]->dtype(), lane) ? Access::kBind : Access::kCopy;
    } else if (inner_stride == 0 && (!whole_rows || same_every_row)) {
      access = Access::kFill;
    } else if (same_every_row) {
      access = Access::kRepeat;
    } else {
      access = Access::kRows;
      gathered_.push_back(k);
    }
    input_access_.push_back({access, inner_stride, size});
  }
}

void TilePlan::PlanOutputs() {
  // A register stored to several outputs is computed into the first and copied to the others;
  // an input register stored as an output is copied, never bound over the input.
  std::vector<bool> bound(program_.register_dtypes.size(), false);
  for (size_t i = 0; i < outputs_.size(); ++i) {
    size_t reg = static_cast<size_t>(program_.outputs[i]);
    Lane lane = *LaneOf(program_.register_dtypes[reg]);
    bool in_place = static_cast<int>(reg) >= program_.num_inputs && !bound[reg] &&
                    StoredAsLane(outputs_[i]->dtype(), lane);
    if (in_place) bound[reg] = true;
    output_access_.push_back({in_place, static_cast<size_t>(ByteSizeOf(outputs_[i]->dtype(), 1))});
  }
  // Registers are written by exactly one instruction (the builder makes a new one for every
  // result), so a constant in an unbound register stays valid across tiles.
  auto constant = [&](const Instr& instruction) {
    return instruction.op == Op::kFill && !bound[static_cast<size_t>(instruction.dst)];
  };
  if (std::none_of(program_.code.begin(), program_.code.end(), constant)) return;
  for (const Instr& instruction : program_.code) {
    (constant(instruction) ? hoisted_ : tile_code_).push_back(instruction);
  }
}

Workspace TilePlan::NewWorkspace() const {
  Workspace workspace(program_, tile_length_, layout_.dims.size());
  for (const Instr& instruction : hoisted_) Execute(workspace.regs, instruction, tile_length_);
  return workspace;
}

void TilePlan::SeekRow(Workspace& workspace, int64_t row) const {
  if (row == workspace.row) return;
  if (row == workspace.row + 1) return NextRow(workspace);
  workspace.row = row;
  for (InputCursor& cursor : workspace.inputs) cursor.row_offset = 0;
  int64_t rest = row;
  for (size_t axis = layout_.dims.size() - 1; axis-- > 0;) {
    workspace.index[axis] = rest % layout_.dims[axis];
    rest /= layout_.dims[axis];
    for (size_t k = 0; k < inputs_.size(); ++k) {
      workspace.inputs[k].row_offset += workspace.index[axis] * layout_.strides[k][axis];
    }
  }
}

void TilePlan::NextRow(Workspace& workspace) const {
  ++workspace.row;
  for (size_t axis = layout_.dims.size() - 1; axis-- > 0;) {
    for (size_t k = 0; k < inputs_.size(); ++k) workspace.inputs[k].row_offset += layout_.strides[k][axis];
    if (++workspace.index[axis] < layout_.dims[axis] || axis == 0) return;
    for (size_t k = 0; k < inputs_.size(); ++k) {
      workspace.inputs[k].row_offset -= layout_.strides[k][axis] * layout_.dims[axis];
    }
    workspace.index[axis] = 0;
  }
}

// Makes input `k`'s register hold the tile that starts `begin` elements into the cursor's row.
void TilePlan::LoadInput(Workspace& workspace, size_t k, int64_t begin, int n) const {
  const InputAccess& access = input_access_[k];
  const RtTensor& input = *inputs_[k];
  InputCursor& cursor = workspace.inputs[k];
  TileRegisters& regs = workspace.regs;
  int reg = static_cast<int>(k);
  int64_t offset = cursor.row_offset + begin * access.inner_stride;
  switch (access.access) {
    case Access::kBind:
      regs.Bind(reg, const_cast<uint8_t*>(input.raw()) + static_cast<size_t>(offset) * access.element_size);
      return;
    case Access::kCopy: return Load(regs, reg, input, offset, 1, 0, n);
    case Access::kFill: case Access::kRepeat: {
      int length = access.access == Access::kFill ? n : tile_length_;
      if (cursor.filled_from == offset && cursor.filled_count >= length) return;
      if (access.access == Access::kFill) {
        Load(regs, reg, input, offset, 0, 0, n);
      } else {
        for (int at = 0; at < length; at += static_cast<int>(inner_)) {
          Load(regs, reg, input, offset, 1, at, static_cast<int>(inner_));
        }
      }
      cursor.filled_from = offset;
      cursor.filled_count = length;
      return;
    }
    case Access::kRows: return;  // GatherRows
  }
}

// Loads the kRows inputs for `rows` whole rows from the cursor's, leaving the cursor on the last.
void TilePlan::GatherRows(Workspace& workspace, int rows) const {
  int length = static_cast<int>(inner_);
  for (int r = 0; r < rows; ++r) {
    if (r > 0) NextRow(workspace);
    for (size_t k : gathered_) {
      Load(workspace.regs, static_cast<int>(k), *inputs_[k], workspace.inputs[k].row_offset,
           input_access_[k].inner_stride, r * length, length);
    }
  }
}

void TilePlan::Run(Workspace& workspace, int64_t tile) const {
  const int64_t first_in_plane = tile % tiles_per_plane_ / tiles_per_row_ * rows_per_tile_;
  int64_t row = tile / tiles_per_plane_ * plane_rows_ + first_in_plane;
  int64_t begin = tile % tiles_per_row_ * tile_length_;
  int rows = static_cast<int>(std::min(rows_per_tile_, plane_rows_ - first_in_plane));
  int n = rows_per_tile_ > 1 ? rows * static_cast<int>(inner_)
                             : static_cast<int>(std::min<int64_t>(tile_length_, inner_ - begin));
  int64_t start = row * inner_ + begin;  // in the (dense) outputs
  SeekRow(workspace, row);
  for (size_t k = 0; k < inputs_.size(); ++k) LoadInput(workspace, k, begin, n);
  if (!gathered_.empty()) GatherRows(workspace, rows);
  TileRegisters& regs = workspace.regs;
  for (size_t i = 0; i < outputs_.size(); ++i) {
    const OutputAccess& access = output_access_[i];
    if (access.in_place) {
      regs.Bind(program_.outputs[i], outputs_[i]->raw() + static_cast<size_t>(start) * access.element_size);
    }
  }
  for (const Instr& instruction : hoisted_.empty() ? program_.code : tile_code_) Execute(regs, instruction, n);
  for (size_t i = 0; i < outputs_.size(); ++i) {
    if (!output_access_[i].in_place) Store(regs, program_.outputs[i], *outputs_[i], start, n);
  }
}

}  // namespace

Status Evaluate(const Program& program, const std::vector<const RtTensor*>& inputs,
                const std::vector<RtTensor*>& outputs) {
  FUSIONOPT_CHECK(static_cast<int>(inputs.size()) == program.num_inputs, "one tensor per program input");
  FUSIONOPT_CHECK(outputs.size() == program.outputs.size(), "one tensor per program output");
  for (size_t k = 0; k < inputs.size(); ++k) {
    FUSIONOPT_CHECK(inputs[k]->dtype() == program.register_dtypes[k], "input dtype matches the program");
  }
  FUSIONOPT_ASSIGN_OR_RETURN(std::vector<int64_t> out_dims, BroadcastDims(inputs));
  int64_t total = 1;
  for (int64_t dim : out_dims) total *= dim;
  if (total == 0) return Status::Ok();
  const TilePlan plan(program, MakeLayout(out_dims, inputs), inputs, outputs, total);
  bool parallel = total >= (int64_t{1} << 15) && omp_get_max_threads() > 1;

#pragma omp parallel if (parallel)
  {
    Workspace workspace = plan.NewWorkspace();
#pragma omp for schedule(static)
    for (int64_t tile = 0; tile < plan.tiles(); ++tile) plan.Run(workspace, tile);
  }
  return Status::Ok();
}

}  // namespace fusionopt::cpu::ew
