// The compile-time schedule of an expression: its shareable nodes, each type once,
// children before parents. Visiting a type that is already listed stops at once, so
// the work is linear in the number of distinct node types, however often a
// subexpression is reused (x1 = x0*x0, x2 = x1*x1, ...: n types, 2^n tree paths).
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <utility>

#include "tapeless/core/config.hpp"
#include "tapeless/expr/node.hpp"

namespace tl::graph {

template <class T> struct type_tag {};

// A type list, and each type with its position as an overload, only ever named inside
// decltype: the type at a position is one overload resolution (the list is walked
// once), not a search instantiated per lookup, and nothing is evaluated, so g++
// mangles nothing. Used on lists of small types (the schedule's steps, below).
template <std::size_t I, class T>
struct indexed_type {
  static std::type_identity<T> type_at(const std::integral_constant<std::size_t, I>*);
};
template <class Positions, class... Ts> struct indexed_types;
template <std::size_t... I, class... Ts>
struct indexed_types<std::index_sequence<I...>, Ts...> : indexed_type<I, Ts>... {
  using indexed_type<I, Ts>::type_at...;
};

template <class... Ts>
struct type_list {
  static constexpr std::size_t size = sizeof...(Ts);
  using indexed = indexed_types<std::index_sequence_for<Ts...>, Ts...>;
};

// Membership as a base-class test (collect_unshared below asks it at every edge of the
// unshareable part, of a list that grows as it goes).
template <class... Ts> struct type_set : type_tag<Ts>... {};
template <class T, class List> struct contains;
template <class T, class... Ts>
struct contains<T, type_list<Ts...>> : std::is_base_of<type_tag<T>, type_set<Ts...>> {};

// The I-th type of List.
template <std::size_t I, class List>
using type_at = typename decltype(List::indexed::type_at(
    static_cast<const std::integral_constant<std::size_t, I>*>(nullptr)))::type;

template <class T, class List> struct append;
template <class T, class... Ts>
struct append<T, type_list<Ts...>> { using type = type_list<Ts..., T>; };

// ---- the schedule -----------------------------------------------------------------
// Built in two steps, each cheap for g++ and for nvcc's front end alike:
//  1. a constant evaluation walks the graph once and lists each shareable type's
//     address key (identity_of<T>::key: one object per type, so equal keys mean equal
//     types), visiting a listed type not again: node_table, its slots in post-order;
//  2. scheduled_steps turns it into a list of small step types (the operation and its
//     children's slots), in slot order, which the sweeps fold over.
// No template is instantiated with the whole expression and a node, or with a list of
// node types, as its arguments: nvcc's front end (cicc) compares such argument lists at
// a cost that grows with the types' size, and a schedule built of them (a list that grew
// with every node) took 42 s for a 32-output cross-entropy sample_loss and did not end
// at 64 outputs, against 1 s and 3 s for g++ (docs/performance.md, 2026-12-06 late).
// Step 2's templates name the table by its address instead of the expression.
// Hash steps that mix every bit of both words into every bit of the result (the
// finaliser of MurmurHash3 after a boost-style combine). A node's hash combines its
// children's, and sin(y)*cos(y) combines two hashes of y: with a step of FNV-1a by
// words they cancelled a bit a level, and two distinct types of the 35-level shared test
// expression got equal hashes. Equal hashes are then told apart by comparing addresses,
// which g++ under -fsanitize=undefined refuses in a constant expression (an error whose
// message prints the 2^35-node type: the ASan/UBSan CI build ran out of memory).
inline constexpr std::uint64_t avalanche(std::uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ull;
  x ^= x >> 33;
  return x;
}
inline constexpr std::uint64_t mix_hash(std::uint64_t h, std::uint64_t v) {
  return avalanche(h ^ (v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2)));
}
inline constexpr std::uint64_t hash_seed = 0xcbf29ce484222325ull;

// An operation's hash (sin_fn, add_op, less_op, ...): its name, as the compiler spells
// it in this function's. Operations are small types, so the name is short.
template <class Op>
constexpr std::uint64_t operation_hash() {
  std::uint64_t h = hash_seed;
  for (const char* c = __PRETTY_FUNCTION__; *c != 0; ++c) h = mix_hash(h, static_cast<unsigned char>(*c));
  return h;
}

// A type's identity as values: the address of its own `key` (one object per type, so
// equal addresses mean equal types), and a hash of its structure (its kind, operation,
// variable index or literal value, and its children's hashes), computed once per type
// from its children's. A node_table finds a type by its hash, without a search of the
// whole table (clang stops a constant evaluation after a million steps: a search made a
// 128-output sample loss's schedule fail there), and compares addresses only where the
// hashes are equal, i.e. in practice only a type's address with itself: g++ with
// -fsanitize=undefined refuses to compare two distinct objects' addresses in a constant
// expression, and a true hash collision would then stop the build, never mix two types.
template <class T> struct identity_of {
  static constexpr char key = 0;
  static constexpr std::uint64_t hash = hash_seed;
};
template <std::size_t I> struct identity_of<variable<I>> {
  static constexpr char key = 0;
  static constexpr std::uint64_t hash = mix_hash(mix_hash(hash_seed, 1), I);
};
template <auto V> struct identity_of<literal<V>> {
  static constexpr char key = 0;
  // The literal's whole spelling (its value's type and value, as the compiler prints
  // them: `Frac{1, 2}`, a long double's 21 digits) and, for integers and enums, the
  // value itself, else the bits of its double: two distinct literals must not share a
  // hash (see mix_hash), and lit<1> and lit<1.0>, or two long doubles that round to
  // one double, are distinct types.
  static constexpr std::uint64_t bits = [] {
    using value_type = decltype(V);
    if constexpr (std::is_integral_v<value_type> || std::is_enum_v<value_type>) return static_cast<std::uint64_t>(V);
    else return std::bit_cast<std::uint64_t>(static_cast<double>(V));
  }();
  static constexpr std::uint64_t hash = mix_hash(mix_hash(operation_hash<literal<V>>(), 2), bits);
};
template <class Op, class A> struct identity_of<unary_node<Op, A>> {
  static constexpr char key = 0;
  static constexpr std::uint64_t hash = mix_hash(mix_hash(operation_hash<Op>(), 4), identity_of<A>::hash);
};
template <class Op, class A, class B> struct identity_of<binary_node<Op, A, B>> {
  static constexpr char key = 0;
  static constexpr std::uint64_t hash =
      mix_hash(mix_hash(mix_hash(operation_hash<Op>(), 5), identity_of<A>::hash), identity_of<B>::hash);
};
template <class C, class A, class B, class P, class Q> struct identity_of<where_node<C, A, B, P, Q>> {
  static constexpr char key = 0;
  static constexpr std::uint64_t hash = mix_hash(
      mix_hash(mix_hash(mix_hash(mix_hash(operation_hash<C>(), 6), identity_of<A>::hash), identity_of<B>::hash),
               identity_of<P>::hash),
      identity_of<Q>::hash);
};

inline constexpr std::size_t not_listed = std::size_t(-1);

// The shareable types' keys in slot order, and an open-addressed index of them by hash
// (twice Capacity buckets, each a slot + 1, 0 when empty).
template <std::size_t Capacity>
struct node_table {
  static constexpr std::size_t buckets = 2 * Capacity;  // Capacity is a power of two
  const void* keys[Capacity]{};
  std::uint64_t hashes[Capacity]{};
  std::size_t bucket[buckets]{};
  std::size_t size = 0;
  std::size_t arity = 0;  // largest variable index + 1 (0 when no variable is used)
  bool full = false;      // more shareable types than Capacity: built again, larger
  // The hash's high bits mixed into the low ones that pick the bucket (the multiply in
  // mix_hash carries bits upwards only: integer literals, whose low bits are all zero,
  // would share a bucket).
  static constexpr std::size_t first_bucket(std::uint64_t h) {
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdull;
    h ^= h >> 33;
    return std::size_t(h % buckets);
  }
  constexpr std::size_t find(const void* key, std::uint64_t hash) const {
    for (std::size_t b = first_bucket(hash); bucket[b] != 0; b = (b + 1) % buckets)
      if (hashes[bucket[b] - 1] == hash && keys[bucket[b] - 1] == key) return bucket[b] - 1;
    return not_listed;
  }
  constexpr void add(const void* key, std::uint64_t hash) {
    if (size == Capacity) {
      full = true;
      return;
    }
    std::size_t b = first_bucket(hash);
    while (bucket[b] != 0) b = (b + 1) % buckets;
    keys[size] = key;
    hashes[size++] = hash;
    bucket[b] = size;
  }
};

template <class Node> struct children_of { using type = type_list<>; };
template <class Op, class A> struct children_of<unary_node<Op, A>> { using type = type_list<A>; };
template <class Op, class A, class B> struct children_of<binary_node<Op, A, B>> { using type = type_list<A, B>; };
template <class C, class A, class B, class P, class Q>
struct children_of<where_node<C, A, B, P, Q>> { using type = type_list<A, B, P, Q>; };

template <class Node> inline constexpr std::size_t variables_below = 0;  // largest variable index + 1
template <std::size_t I> inline constexpr std::size_t variables_below<variable<I>> = I + 1;

// Post-order: children first, then the node when it is shareable. Unshareable nodes
// (run-time constants and what holds them) are walked at each occurrence, as the sweep
// evaluates them (bounded by record_limit). One constant-evaluation frame a level of
// the expression (the children are folded over here, not in a lambda): compilers stop
// at 512 frames, so expressions nest up to about 500 levels. Once the table is full the
// walk stops: unrecorded, shared subexpressions would be walked once per path.
template <class Node, std::size_t Capacity, class... Children>
constexpr void schedule_into(node_table<Capacity>& table, type_list<Children...>) {
  if (table.full) return;
  if constexpr (is_shareable_v<Node>)
    if (table.find(&identity_of<Node>::key, identity_of<Node>::hash) != not_listed) return;
  (schedule_into<Children>(table, typename children_of<Children>::type{}), ...);
  if constexpr (is_shareable_v<Node>) table.add(&identity_of<Node>::key, identity_of<Node>::hash);
  if constexpr (variables_below<Node> != 0)  // (nvcc warns of `0 > arity`, with the whole type)
    if (variables_below<Node> > table.arity) table.arity = variables_below<Node>;
}
// Larger tables for larger graphs, up to 2^22 shareable types.
template <class Expr, std::size_t Capacity = 256>
constexpr auto make_node_table() {
  constexpr auto table = [] {
    node_table<Capacity> t{};
    schedule_into<Expr>(t, typename children_of<Expr>::type{});
    return t;
  }();
  if constexpr (table.full) {
    static_assert(Capacity < (std::size_t(1) << 22), "tapeless: an expression of over 4 million distinct nodes");
    if constexpr (Capacity < (std::size_t(1) << 22)) return make_node_table<Expr, 4 * Capacity>();
    else return table;
  } else {
    return table;
  }
}
template <class Expr> struct schedule_of { static constexpr auto table = make_node_table<Expr>(); };

// A node's slot in the schedule whose table is *Table, or not_listed (a variable the
// expression does not use).
template <auto Table, class Node>
using slot_in = std::integral_constant<std::size_t, Table->find(&identity_of<Node>::key, identity_of<Node>::hash)>;

// What a sweep does at a scheduled node, with its children named by their slots: a
// small type (the operation and a few numbers), so the code generated for a node is not
// named after the node's whole subgraph. (g++ mangles every function it generates, even
// those it inlines; named after their nodes, the sweeps' functions made a 64-output
// sample loss spend most of its build in the mangler.)
template <std::size_t Index> struct load_variable {};
template <class Literal> struct load_literal {};
template <class Op, std::size_t A> struct unary_step {};
template <class Op, std::size_t A, std::size_t B> struct binary_step {};
template <class Compare, std::size_t A, std::size_t B, std::size_t P, std::size_t Q> struct where_step {};

template <auto Table, class Node> struct step_of;
template <auto Table, std::size_t I>
struct step_of<Table, variable<I>> { using type = load_variable<I>; };
template <auto Table, auto V>
struct step_of<Table, literal<V>> { using type = load_literal<literal<V>>; };
template <auto Table, class Op, class A>
struct step_of<Table, unary_node<Op, A>> { using type = unary_step<Op, slot_in<Table, A>::value>; };
template <auto Table, class Op, class A, class B>
struct step_of<Table, binary_node<Op, A, B>> {
  using type = binary_step<Op, slot_in<Table, A>::value, slot_in<Table, B>::value>;
};
template <auto Table, class C, class A, class B, class P, class Q>
struct step_of<Table, where_node<C, A, B, P, Q>> {
  using type = where_step<C, slot_in<Table, A>::value, slot_in<Table, B>::value, slot_in<Table, P>::value,
                          slot_in<Table, Q>::value>;
};

// Steps: the steps listed so far, in slot order. A shareable node whose slot is below
// their count is already listed; any other node lists its children's new steps, then
// its own. The same walk as schedule_into, so the list's positions are the slots; one
// level of instantiation a level of the expression (compilers stop at about 900).
template <auto Table, class Node, class Steps, bool Shareable = is_shareable_v<Node>>
struct with_step { using type = Steps; };
template <auto Table, class Node, class Steps>
struct with_step<Table, Node, Steps, true> { using type = typename append<typename step_of<Table, Node>::type, Steps>::type; };

template <auto Table, class Node, class Steps,
          bool Listed = is_shareable_v<Node> && (slot_in<Table, Node>::value < Steps::size)>
struct scheduled_steps { using type = Steps; };
template <auto Table, class Node, class Steps>
using scheduled_steps_t = typename scheduled_steps<Table, Node, Steps>::type;
template <auto Table, class Node, class Steps>
struct scheduled_steps<Table, Node, Steps, false> { using type = typename with_step<Table, Node, Steps>::type; };
template <auto Table, class Op, class A, class Steps>
struct scheduled_steps<Table, unary_node<Op, A>, Steps, false> {
  using type = typename with_step<Table, unary_node<Op, A>, scheduled_steps_t<Table, A, Steps>>::type;
};
template <auto Table, class Op, class A, class B, class Steps>
struct scheduled_steps<Table, binary_node<Op, A, B>, Steps, false> {
  using type = typename with_step<Table, binary_node<Op, A, B>,
                                  scheduled_steps_t<Table, B, scheduled_steps_t<Table, A, Steps>>>::type;
};
template <auto Table, class C, class A, class B, class P, class Q, class Steps>
struct scheduled_steps<Table, where_node<C, A, B, P, Q>, Steps, false> {
  using type = typename with_step<
      Table, where_node<C, A, B, P, Q>,
      scheduled_steps_t<Table, Q, scheduled_steps_t<Table, P, scheduled_steps_t<Table, B, scheduled_steps_t<Table, A, Steps>>>>>::type;
};

// Calls f(std::index_sequence<I...>{}) on 0 .. Count - 1 in order, in runs of at most
// 128 indices, for the sweeps to fold over: clang refuses a fold of more than 256 terms
// (its bracket depth), which a sample loss over 29 outputs already has slots for. f is
// instantiated once a run, never once an index (graph.hpp's note on mangling).
inline constexpr std::size_t run_length = 128;
template <std::size_t Offset, std::size_t... I>
std::index_sequence<Offset + I...> offset_by(std::index_sequence<I...>);
// The R-th run's indices. A class, not an expression in the fold below: g++ 13 refuses
// make_index_sequence inside another pack's expansion ("sorry, unimplemented").
template <std::size_t R, std::size_t Count>
struct run_indices {
  using type = decltype(offset_by<R * run_length>(
      std::make_index_sequence<(R + 1) * run_length <= Count ? run_length : Count - R * run_length>{}));
};
template <std::size_t Count, class F>
TL_HD TL_INLINE constexpr void for_each_run(F&& f) {
  [&]<std::size_t... R>(std::index_sequence<R...>) {
    (f(typename run_indices<R, Count>::type{}), ...);
  }(std::make_index_sequence<(Count + run_length - 1) / run_length>{});
}

// What the sweeps use: the table's address, the steps in slot order (a type_list), the
// number of slots, and the largest variable index + 1.
template <class Expr> inline constexpr const auto* schedule_table = &schedule_of<std::remove_cvref_t<Expr>>::table;
template <class Expr>
using schedule_steps = typename scheduled_steps<schedule_table<Expr>, std::remove_cvref_t<Expr>, type_list<>>::type;
template <class Expr> inline constexpr std::size_t schedule_size = schedule_table<Expr>->size;
template <class Expr> inline constexpr std::size_t arity = schedule_table<Expr>->arity;

// How many records the evaluation of the unshareable part keeps: the nodes above a
// run-time constant are evaluated once per path, so a reused subexpression that holds
// one is copied once per use, 2^depth times for `y = sin(y) * cos(y) * 0.9` repeated.
// Counted per type (each instantiated once), saturating instead of overflowing.
inline constexpr std::size_t saturating_add(std::size_t a, std::size_t b) {
  return a + b < a ? std::size_t(-1) : a + b;
}
template <class Node>
inline constexpr std::size_t record_count = 1;  // shareable nodes and constants: one leaf
template <class Op, class A>
inline constexpr std::size_t record_count<unary_node<Op, A>> =
    is_shareable_v<unary_node<Op, A>> ? 1 : saturating_add(1, record_count<A>);
template <class Op, class A, class B>
inline constexpr std::size_t record_count<binary_node<Op, A, B>> =
    is_shareable_v<binary_node<Op, A, B>> ? 1 : saturating_add(1, saturating_add(record_count<A>, record_count<B>));
template <class C, class A, class B, class P, class Q>
inline constexpr std::size_t record_count<where_node<C, A, B, P, Q>> =
    is_shareable_v<where_node<C, A, B, P, Q>>
        ? 1
        : saturating_add(saturating_add(1, saturating_add(record_count<A>, record_count<B>)),
                         saturating_add(record_count<P>, record_count<Q>));

// Past this many records an expression is refused at compile time (expr/trace.hpp).
inline constexpr std::size_t record_limit = 4096;

// The distinct node types above the shareable part (run-time constants and what holds
// them), each once: what the records would be without duplication.
template <class Node, class Acc, bool Skip = is_shareable_v<Node> || contains<Node, Acc>::value>
struct collect_unshared;
template <class Node, class Acc>
using collect_unshared_t = typename collect_unshared<Node, Acc>::type;
template <class Node, class Acc>
struct collect_unshared<Node, Acc, true> { using type = Acc; };
template <class Node, class Acc>
struct collect_unshared<Node, Acc, false> { using type = typename append<Node, Acc>::type; };  // leaves
template <class Op, class A, class Acc>
struct collect_unshared<unary_node<Op, A>, Acc, false> {
  using type = typename append<unary_node<Op, A>, collect_unshared_t<A, Acc>>::type;
};
template <class Op, class A, class B, class Acc>
struct collect_unshared<binary_node<Op, A, B>, Acc, false> {
  using type = typename append<binary_node<Op, A, B>, collect_unshared_t<B, collect_unshared_t<A, Acc>>>::type;
};
template <class C, class A, class B, class P, class Q, class Acc>
struct collect_unshared<where_node<C, A, B, P, Q>, Acc, false> {
  using type = typename append<where_node<C, A, B, P, Q>,
                               collect_unshared_t<Q, collect_unshared_t<P, collect_unshared_t<B, collect_unshared_t<A, Acc>>>>>::type;
};

// A subexpression with a run-time constant, reused, is copied at every use: the records
// then outnumber the distinct nodes many times over, and double at every further level
// of reuse. Caught as a node is built, while its type is still small enough to print.
template <class Node>
inline constexpr bool duplicates_too_much =
    !is_shareable_v<Node> && record_count<Node> > 256 &&
    record_count<Node> > 32 * collect_unshared_t<Node, type_list<>>::size;

}  // namespace tl::graph
