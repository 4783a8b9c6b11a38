// "Did you mean" suggestions for misspelt names (ops, attributes, config keys).
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace disc {

// Levenshtein distance between two strings.
int edit_distance(std::string_view a, std::string_view b);

// The candidate nearest to `name`, or "" when none is close enough to be a plausible typo.
std::string nearest(std::string_view name, const std::vector<std::string>& candidates);

// " (did you mean `x`?)" or "".
std::string did_you_mean(std::string_view name, const std::vector<std::string>& candidates);

}  // namespace disc
