// Einsum equations: parsing, and binding the labels to concrete (or declared) operand dims.
#include <algorithm>
#include <array>

#include "cpu_runtime/einsum/einsum.h"

namespace fusionopt::cpu::einsum {
namespace {

bool IsLetter(char c) { return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z'); }

int LetterLabel(char letter) { return letter <= 'Z' ? letter - 'A' : 26 + (letter - 'a'); }

char LabelLetter(int label) { return static_cast<char>(label < 26 ? 'A' + label : 'a' + (label - 26)); }

std::string Quoted(std::string_view text) { return "'" + std::string(text) + "'"; }

std::string SizesToString(const std::vector<int64_t>& dims) {
  std::string text = "[";
  for (size_t i = 0; i < dims.size(); ++i) {
    if (i > 0) text += ",";
    text += dims[i] < 0 ? "?" : std::to_string(dims[i]);
  }
  return text + "]";
}

Result<Term> ParseTerm(std::string_view text) {
  Term term;
  term.text = std::string(text);
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (IsLetter(c)) {
      term.letters.push_back(c);
    } else if (c == '.') {
      if (text.substr(i, 3) != "...") return InvalidModel("term " + Quoted(text) + " has a '.' outside '...'");
      if (term.ellipsis_at) return InvalidModel("term " + Quoted(text) + " has '...' twice");
      term.ellipsis_at = term.letters.size();
      i += 2;
    } else {
      return InvalidModel("term " + Quoted(text) + " has the character " + Quoted(std::string(1, c)) +
                          "; labels are letters");
    }
  }
  return term;
}

Status CheckOutput(const Term& output, const std::vector<Term>& inputs) {
  std::array<bool, kLetterLabels> seen{};
  for (char letter : output.letters) {
    const int label = LetterLabel(letter);
    if (seen[label]) return InvalidModel("output label " + Quoted(std::string(1, letter)) + " appears twice");
    seen[label] = true;
    const bool used = std::any_of(inputs.begin(), inputs.end(), [&](const Term& input) {
      return input.letters.find(letter) != std::string::npos;
    });
    if (!used) return InvalidModel("output label " + Quoted(std::string(1, letter)) + " is in no input term");
  }
  return Status::Ok();
}

// Broadcasts the "..." sizes of one operand into `combined` (both right-aligned, -1 unknown).
Status BroadcastEllipsis(std::vector<int64_t>& combined, const std::vector<int64_t>& part, const Term& term) {
  const size_t offset = combined.size() - part.size();
  for (size_t i = 0; i < part.size(); ++i) {
    int64_t& size = combined[offset + i];
    const int64_t other = part[i];
    if (size < 0 || other < 0) {
      // An unknown size is either 1 or the other's: only a known size above 1 is certain.
      size = std::max(size, other) > 1 ? std::max(size, other) : -1;
    } else if (size == 1 || size == other) {
      size = other;
    } else if (other != 1) {
      return InvalidModel("the '...' dims of term " + Quoted(term.text) + ", " + SizesToString(part) +
                          ", do not broadcast with the others");
    }
  }
  return Status::Ok();
}

class Binder {
 public:
  explicit Binder(const Equation& equation) : equation_(equation) {}

  Result<Labeling> Run(const std::vector<std::vector<int64_t>>& dims) {
    FUSIONOPT_RETURN_IF_ERROR(CheckRanks(dims));
    labeling_.sizes.assign(kLetterLabels + ellipsis_.size(), -1);
    std::copy(ellipsis_.begin(), ellipsis_.end(), labeling_.sizes.begin() + kLetterLabels);
    for (size_t operand = 0; operand < dims.size(); ++operand) {
      FUSIONOPT_RETURN_IF_ERROR(LabelOperand(equation_.inputs[operand], dims[operand]));
    }
    FUSIONOPT_RETURN_IF_ERROR(LabelOutput());
    return std::move(labeling_);
  }

 private:
  size_t EllipsisRank(const Term& term, size_t rank) const { return term.ellipsis_at ? rank - term.letters.size() : 0; }

  // Ranks against letter counts, and the broadcast size of the "..." dims.
  Status CheckRanks(const std::vector<std::vector<int64_t>>& dims) {
    FUSIONOPT_CHECK(dims.size() == equation_.inputs.size(), "one dims list per term");
    for (size_t operand = 0; operand < dims.size(); ++operand) {
      const Term& term = equation_.inputs[operand];
      const size_t rank = dims[operand].size(), letters = term.letters.size();
      if (term.ellipsis_at ? rank < letters : rank != letters) {
        return InvalidModel("operand " + std::to_string(operand) + " has rank " + std::to_string(rank) +
                            " but its term " + Quoted(term.text) + " names " + std::to_string(letters) +
                            (term.ellipsis_at ? " axes besides '...'" : " axes"));
      }
      // The "..." dims are right-aligned: a longer one adds dims of size 1 in front.
      const size_t ellipsis_rank = EllipsisRank(term, rank);
      if (ellipsis_rank > ellipsis_.size()) ellipsis_.insert(ellipsis_.begin(), ellipsis_rank - ellipsis_.size(), 1);
    }
    for (size_t operand = 0; operand < dims.size(); ++operand) {
      const Term& term = equation_.inputs[operand];
      const auto begin = dims[operand].begin() + static_cast<std::ptrdiff_t>(term.ellipsis_at.value_or(0));
      const auto end = begin + static_cast<std::ptrdiff_t>(EllipsisRank(term, dims[operand].size()));
      FUSIONOPT_RETURN_IF_ERROR(BroadcastEllipsis(ellipsis_, std::vector<int64_t>(begin, end), term));
    }
    return Status::Ok();
  }

  Status LabelOperand(const Term& term, const std::vector<int64_t>& dims) {
    std::vector<int>& labels = labeling_.operands.emplace_back();
    const size_t ellipsis_rank = EllipsisRank(term, dims.size());
    for (size_t letter = 0; letter <= term.letters.size(); ++letter) {
      if (term.ellipsis_at == letter) {
        const int first = kLetterLabels + static_cast<int>(ellipsis_.size() - ellipsis_rank);
        for (size_t i = 0; i < ellipsis_rank; ++i) labels.push_back(first + static_cast<int>(i));
      }
      if (letter == term.letters.size()) break;
      const int label = LetterLabel(term.letters[letter]);
      FUSIONOPT_RETURN_IF_ERROR(BindSize(label, dims[labels.size()]));
      labels.push_back(label);
      ++letter_counts_[label];
    }
    return Status::Ok();
  }

  Status BindSize(int label, int64_t size) {
    int64_t& bound = labeling_.sizes[label];
    if (bound >= 0 && size >= 0 && bound != size) {
      return InvalidModel("label " + Quoted(std::string(1, LabelLetter(label))) + " has sizes " +
                          std::to_string(bound) + " and " + std::to_string(size));
    }
    if (bound < 0) bound = size;
    return Status::Ok();
  }

  std::vector<int> EllipsisLabels() const {
    std::vector<int> labels;
    for (size_t i = 0; i < ellipsis_.size(); ++i) labels.push_back(kLetterLabels + static_cast<int>(i));
    return labels;
  }

  // Explicit: as written. Implicit: the "..." dims, then the letters used once, sorted.
  Status LabelOutput() {
    std::vector<int>& output = labeling_.output;
    if (!equation_.output) {
      output = EllipsisLabels();
      for (int label = 0; label < kLetterLabels; ++label) {
        if (letter_counts_[label] == 1) output.push_back(label);
      }
      return Status::Ok();
    }
    const Term& term = *equation_.output;
    if (!term.ellipsis_at && !ellipsis_.empty()) {
      return InvalidModel("the inputs have " + std::to_string(ellipsis_.size()) +
                          " dims under '...' but the output term " + Quoted(term.text) + " has no '...'");
    }
    for (size_t letter = 0; letter <= term.letters.size(); ++letter) {
      if (term.ellipsis_at == letter) {
        for (int label : EllipsisLabels()) output.push_back(label);
      }
      if (letter < term.letters.size()) output.push_back(LetterLabel(term.letters[letter]));
    }
    return Status::Ok();
  }

  const Equation& equation_;
  Labeling labeling_;
  std::vector<int64_t> ellipsis_;  // broadcast sizes of the "..." dims, -1 unknown
  std::array<int, kLetterLabels> letter_counts_{};
};

}  // namespace

Result<Equation> ParseEquation(std::string_view text) {
  Equation equation;
  equation.text = std::string(text);
  std::string compact;
  for (char c : text) {
    if (c != ' ' && c != '\t') compact.push_back(c);
  }
  const size_t arrow = compact.find("->");
  const std::string_view lhs = std::string_view(compact).substr(0, arrow);
  size_t start = 0;
  for (size_t comma = lhs.find(','); ; comma = lhs.find(',', start)) {
    FUSIONOPT_ASSIGN_OR_RETURN(Term term, ParseTerm(lhs.substr(start, comma - start)));
    equation.inputs.push_back(std::move(term));
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  if (arrow != std::string::npos) {
    FUSIONOPT_ASSIGN_OR_RETURN(Term output, ParseTerm(std::string_view(compact).substr(arrow + 2)));
    FUSIONOPT_RETURN_IF_ERROR(CheckOutput(output, equation.inputs));
    equation.output = std::move(output);
  }
  return equation;
}

Result<Labeling> Bind(const Equation& equation, const std::vector<std::vector<int64_t>>& dims) {
  return Binder(equation).Run(dims);
}

}  // namespace fusionopt::cpu::einsum
