// A type passed to a template as a value, std::type_identity<T>{} for an `auto`
// parameter, and read back here. Why a value: g++ walks a class's type arguments,
// and theirs, whenever it looks the class up by argument, and takes a shared
// expression's type (a graph) for a tree there: a 28-level shared activation took
// 100 s to build as a type argument (nn/activation.hpp). A value argument is not walked.
#pragma once

#include <type_traits>

namespace tl::detail {

// The type that V (a std::type_identity<T> value) names. nvcc's host pass sees
// decltype(V) as a reference, hence remove_cvref.
template <auto V>
using type_named_by = typename std::remove_cvref_t<decltype(V)>::type;

}  // namespace tl::detail
