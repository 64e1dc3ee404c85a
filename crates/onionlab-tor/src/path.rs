//! Bandwidth-weighted relay selection for the guard, middle and exit positions of a
//! three-hop circuit.
//!
//! **Owns:** relay flags ([`RelayFlags`]), the per-relay directory view path selection
//! needs ([`RelayInfo`]), the consensus "bandwidth-weights" ([`BandwidthWeights`]) and the
//! precomputed per-position selection tables ([`PathSelector`]).
//!
//! **Must not touch:** circuits, channels, guard-state persistence or anything else that
//! happens after a relay has been picked (that is [`crate::network`]'s job); it never reads
//! a clock and never allocates relay identities — relays are plain indices into the slice
//! given to [`PathSelector::new`].
//!
//! **Tor source followed** (tor 0.4.8):
//!
//! * `src/feature/nodelist/node_select.c: compute_weighted_bandwidths` — the weight of a
//!   relay in a position is its consensus bandwidth (`w Bandwidth=`) times one of the
//!   position's four weights, picked by the relay's flags: Guard+Exit → `W?d`, Guard only →
//!   `W?g`, Exit only → `W?e`, neither → `W?m`. A relay with `BadExit` counts as a non-exit
//!   here (`is_exit = node->is_exit && ! node->is_bad_exit`).
//! * `node_select.c: node_sl_choose_by_bandwidth` / `choose_array_element_by_weight` —
//!   pick with probability proportional to weight. Tor turns the `double` weights into
//!   `uint64_t`s and draws `crypto_rand_uint64(total)`; we keep the weights exact as
//!   `bandwidth × weight` integers (`u128`) and draw uniformly below their sum, which is the
//!   same distribution without tor's rounding. Tor's historical
//!   `smartlist_choose_node_by_bandwidth_weights` (0.2.2–0.2.9) computed the same thing.
//! * dir-spec section 3.8.3 "bandwidth-weights" (the `Wxy` keys and `bwweightscale`,
//!   default 10000, allowed 1..=`INT32_MAX`).
//! * `src/core/or/circuitbuild.c: onion_pick_cpath_exit`, `onion_extend_cpath`,
//!   `choose_good_entry_server`, `choose_good_middle_server` — the exit is chosen first,
//!   then the guard, then the middle, all distinct. Circuits are built with
//!   `need_capacity` set, so `node_is_unreliable` rejects relays without the `Fast` flag in
//!   every position; we require [`RelayFlags::FAST`] everywhere. With entry guards,
//!   `entrynodes.c: select_primary_guard_for_circuit` ([`PathSelector::guard_for_exit`])
//!   picks the guard among the client's primary guards that obey the exit; the caller
//!   keeps the guards and chooses the order (`TorConfig::path_order`: tor's exit-first by
//!   default; the model's earlier guard-first draw is [`PathSelector::choose_path`] with
//!   a guard).
//!
//! * `EnforceDistinctSubnets` (default 1; `nodelist_add_node_and_family`,
//!   `addrs_in_same_network_family`): no two relays of a path in the same IPv4 /16.
//!   Applied to relays whose address is known ([`RelayInfo::subnet`]); a relay without one
//!   is never excluded for its network. Keeping a client's entry guards in distinct /16s
//!   as well is tor 0.2.2's rule (`choose_good_entry_server` excluded the current guards'
//!   families when adding one); tor 0.4.8 samples guards with no /16 rule. The caller
//!   chooses ([`PathSelector::choose_apart`]; `TorConfig::distinct_guard_subnets`).
//!
//! **Not modelled** (documented simplifications): relays are assumed `Running` and `Valid`
//! (the flags are kept but not checked); tor's family exclusion (`MyFamily`, declared in
//! server descriptors, which a consensus does not carry) is not applied; exit-policy matching for a particular port is not modelled, so
//! the exit position is "has `Exit`, lacks `BadExit`" and `Weg`/`Wem` (weights for relays
//! allowed to exit by "odd exit policies") are parsed but never used; the directory
//! multipliers `Wgb`/`Wmb`/`Web`/`Wdb` are accepted and ignored (they are 10000, i.e. 1, in
//! every consensus since 2011); guard sampling/persistence (`entrynodes.c`) is the caller's.
//!
//! Everything is deterministic given the RNG: no hash-map iteration, ties broken by index.

use std::fmt;
use std::ops::{BitOr, BitOrAssign};

/// The consensus flags of a relay (dir-spec 3.4.1 "s" line), as a bit set.
///
/// Only [`GUARD`](Self::GUARD), [`EXIT`](Self::EXIT), [`BAD_EXIT`](Self::BAD_EXIT) and
/// [`FAST`](Self::FAST) affect path selection; the others are carried for callers.
#[derive(Clone, Copy, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RelayFlags(pub u16);

/// Flag names as they appear in the consensus, in bit order.
const FLAG_NAMES: [(&str, RelayFlags); 10] = [
    ("Guard", RelayFlags::GUARD),
    ("Exit", RelayFlags::EXIT),
    ("Fast", RelayFlags::FAST),
    ("Stable", RelayFlags::STABLE),
    ("Running", RelayFlags::RUNNING),
    ("Valid", RelayFlags::VALID),
    ("BadExit", RelayFlags::BAD_EXIT),
    ("HSDir", RelayFlags::HSDIR),
    ("V2Dir", RelayFlags::V2DIR),
    ("Authority", RelayFlags::AUTHORITY),
];

impl RelayFlags {
    /// No flags.
    pub const EMPTY: RelayFlags = RelayFlags(0);
    /// `Guard`: may be chosen for the first hop.
    pub const GUARD: RelayFlags = RelayFlags(1 << 0);
    /// `Exit`: allows exiting to the common ports.
    pub const EXIT: RelayFlags = RelayFlags(1 << 1);
    /// `Fast`: required in every position of a general-purpose circuit.
    pub const FAST: RelayFlags = RelayFlags(1 << 2);
    /// `Stable`: long uptime (only needed by circuits with `need_uptime`; not modelled).
    pub const STABLE: RelayFlags = RelayFlags(1 << 3);
    /// `Running`: reachable (assumed for every relay given to [`PathSelector`]).
    pub const RUNNING: RelayFlags = RelayFlags(1 << 4);
    /// `Valid`: approved (assumed for every relay given to [`PathSelector`]).
    pub const VALID: RelayFlags = RelayFlags(1 << 5);
    /// `BadExit`: never chosen as exit, and weighted as a non-exit elsewhere.
    pub const BAD_EXIT: RelayFlags = RelayFlags(1 << 6);
    /// `HSDir`: onion-service directory.
    pub const HSDIR: RelayFlags = RelayFlags(1 << 7);
    /// `V2Dir`: directory cache.
    pub const V2DIR: RelayFlags = RelayFlags(1 << 8);
    /// `Authority`: directory authority.
    pub const AUTHORITY: RelayFlags = RelayFlags(1 << 9);

    /// True if every flag in `other` is set in `self` (true for an empty `other`).
    pub fn contains(self, other: RelayFlags) -> bool {
        self.0 & other.0 == other.0
    }

    /// Parses consensus flag names (case-sensitive, as on the "s" line: `Guard`, `Exit`,
    /// `Fast`, `Stable`, `Running`, `Valid`, `BadExit`, `HSDir`, `V2Dir`, `Authority`).
    /// Unknown names (e.g. `NoEdConsensus`, `StaleDesc`) are ignored.
    pub fn from_names<'a>(names: impl IntoIterator<Item = &'a str>) -> RelayFlags {
        let mut flags = RelayFlags::EMPTY;
        for name in names {
            if let Some((_, f)) = FLAG_NAMES.iter().find(|(n, _)| *n == name) {
                flags |= *f;
            }
        }
        flags
    }
}

impl BitOr for RelayFlags {
    type Output = RelayFlags;
    fn bitor(self, rhs: RelayFlags) -> RelayFlags {
        RelayFlags(self.0 | rhs.0)
    }
}

impl BitOrAssign for RelayFlags {
    fn bitor_assign(&mut self, rhs: RelayFlags) {
        self.0 |= rhs.0;
    }
}

impl fmt::Debug for RelayFlags {
    /// Prints the consensus names, e.g. `RelayFlags(Guard|Fast)`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "RelayFlags(")?;
        let mut first = true;
        for (name, flag) in FLAG_NAMES {
            if self.contains(flag) {
                if !first {
                    write!(f, "|")?;
                }
                write!(f, "{name}")?;
                first = false;
            }
        }
        let unknown = self.0 & !FLAG_NAMES.iter().fold(0, |acc, (_, fl)| acc | fl.0);
        if unknown != 0 {
            write!(f, "{}{unknown:#x}", if first { "" } else { "|" })?;
        }
        write!(f, ")")
    }
}

/// What path selection knows about one relay: its consensus entry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RelayInfo {
    /// Relay nickname (for messages only).
    pub nickname: String,
    /// Consensus weight (`w Bandwidth=`), in the consensus's units (KB/s, as measured by the
    /// bandwidth authorities). Only ratios matter.
    pub bandwidth: u64,
    /// Consensus flags.
    pub flags: RelayFlags,
    /// The relay's IPv4 /16 (its address's first two octets); `None`: unknown.
    pub subnet: Option<u16>,
}

impl RelayInfo {
    /// The /16 of an IPv4 address, as tor compares them (`addrs_in_same_network_family`).
    pub fn subnet_of(addr: std::net::Ipv4Addr) -> u16 {
        let [a, b, _, _] = addr.octets();
        u16::from_be_bytes([a, b])
    }
}

/// A hop position in a three-hop circuit.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Position {
    /// First hop (entry guard). Tor's `WEIGHT_FOR_GUARD`.
    Guard,
    /// Second hop. Tor's `WEIGHT_FOR_MID`.
    Middle,
    /// Last hop. Tor's `WEIGHT_FOR_EXIT`.
    Exit,
}

impl Position {
    const ALL: [Position; 3] = [Position::Guard, Position::Middle, Position::Exit];

    fn index(self) -> usize {
        match self {
            Position::Guard => 0,
            Position::Middle => 1,
            Position::Exit => 2,
        }
    }
}

/// Consensus "bandwidth-weights" (dir-spec 3.8.3), each scaled by `scale` (`scale` = weight 1).
///
/// `Wxy` is the weight of a relay of class `y` in position `x`, where the position is
/// `g` (guard), `m` (middle), `e` (exit) or `b` (directory fetch) and the class is `g`
/// (Guard flag only), `m` (neither), `e` (Exit only) or `d` (Guard and Exit). All values are
/// dimensionless, in units of `1/scale`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BandwidthWeights {
    /// Guard-flagged relays in the guard position.
    pub wgg: i64,
    /// Unflagged relays in the guard position (bridges only in tor; unused here).
    pub wgm: i64,
    /// Guard+Exit relays in the guard position.
    pub wgd: i64,
    /// Guard-flagged relays in the middle position.
    pub wmg: i64,
    /// Unflagged relays in the middle position.
    pub wmm: i64,
    /// Exit-flagged relays in the middle position.
    pub wme: i64,
    /// Guard+Exit relays in the middle position.
    pub wmd: i64,
    /// Guard-flagged relays in the exit position (odd exit policies; unused here).
    pub weg: i64,
    /// Unflagged relays in the exit position (odd exit policies; unused here).
    pub wem: i64,
    /// Exit-flagged relays in the exit position.
    pub wee: i64,
    /// Guard+Exit relays in the exit position.
    pub wed: i64,
    /// Guard-flagged relays for directory fetches (parsed, unused).
    pub wbg: i64,
    /// Unflagged relays for directory fetches (parsed, unused).
    pub wbm: i64,
    /// Exit-flagged relays for directory fetches (parsed, unused).
    pub wbe: i64,
    /// Guard+Exit relays for directory fetches (parsed, unused).
    pub wbd: i64,
    /// The weight that means 1 (`bwweightscale`, 10000 by default; 1..=`i32::MAX`).
    pub scale: i64,
}

/// Tor's default `bwweightscale` (`BW_WEIGHT_SCALE`).
pub const DEFAULT_WEIGHT_SCALE: i64 = 10_000;

/// Keys that must be present on a "bandwidth-weights" line, in dir-spec order.
const REQUIRED_KEYS: [&str; 11] = ["Wgg", "Wgm", "Wgd", "Wmg", "Wmm", "Wme", "Wmd", "Weg", "Wem", "Wee", "Wed"];
/// Keys that may be present (default: `scale`).
const OPTIONAL_KEYS: [&str; 4] = ["Wbg", "Wbm", "Wbe", "Wbd"];

impl Default for BandwidthWeights {
    /// Same as [`BandwidthWeights::uniform`].
    fn default() -> Self {
        Self::uniform()
    }
}

impl BandwidthWeights {
    /// All weights 1 (`scale` = 10000): every eligible relay is weighted by its bandwidth
    /// alone, in every position.
    ///
    /// This is what current tor does when the consensus has no (or a negative)
    /// bandwidth-weights entry: `compute_weighted_bandwidths` reads each `Wxy` with default
    /// -1 and, on any negative value, logs "Got negative bandwidth weights. Defaulting to
    /// naive selection algorithm." and sets every weight to `weight_scale`.
    ///
    /// It is a **simplification** of what tor 0.2.2–0.2.7 did with a weight-less consensus
    /// (e.g. the 2010 ones): it fell back to `smartlist_choose_node_by_bandwidth`, which for
    /// non-exit positions scaled Exit relays by `max(0, 1 − T/(3E))` and for non-guard
    /// positions scaled Guard relays by `max(0, 1 − T/(3G))` (T, E, G: total, exit and guard
    /// bandwidth; so scarce exits/guards are kept for their own position) and capped each
    /// relay's bandwidth at 10 MB/s. That rule is not modelled here. For the weights a
    /// network's own directory authorities would publish, see [`Self::computed_v10`].
    pub fn uniform() -> Self {
        let s = DEFAULT_WEIGHT_SCALE;
        BandwidthWeights {
            wgg: s,
            wgm: s,
            wgd: s,
            wmg: s,
            wmm: s,
            wme: s,
            wmd: s,
            weg: s,
            wem: s,
            wee: s,
            wed: s,
            wbg: s,
            wbm: s,
            wbe: s,
            wbd: s,
            scale: s,
        }
    }

    /// The weights tor's directory authorities put on the bandwidth-weights line for relays
    /// with these totals (`networkstatus_compute_bw_weights_v10`, consensus method 10 and
    /// later; dir-spec 3.8.3), at weight scale `scale`: integer arithmetic, cases and
    /// fallbacks as tor has them. Networks from a consensus without weights (before
    /// consensus method 9, e.g. 2010's) get what a network of tor >= 0.2.2.17 authorities
    /// would have published for the same relays. `Wgm = Wgg`, `Wmm = scale`, `Wem = Wee`,
    /// `Weg = Wed`, and the directory weights `Wb*` are `Wmd`, `Wme`, `Wmg`, `scale` (d, e,
    /// g, m), as tor writes them.
    ///
    /// Errors: a class with no bandwidth, or weights that fail tor's balance checks (tor
    /// then publishes no line).
    pub fn computed_v10(t: BandwidthTotals, scale: i64) -> Result<Self, PathError> {
        if !(1..=i64::from(i32::MAX)).contains(&scale) {
            return Err(PathError::BadScale { scale });
        }
        let empty = [("Guard-only", t.g), ("unflagged", t.m), ("Exit-only", t.e), ("Guard+Exit", t.d)].into_iter().find(|c| c.1 == 0);
        if let Some((class, _)) = empty {
            return Err(PathError::EmptyClass { class, g: t.g, m: t.m, e: t.e, d: t.d });
        }
        let (g, m, e, d) = (t.g as i64, t.m as i64, t.e as i64, t.d as i64);
        let tt = g + m + e + d;
        let s = scale;
        let check = |w: [i64; 7]| check_weights(w, t, s);
        // [Wgg, Wgd, Wmg, Wme, Wmd, Wee, Wed]
        let (_case, w): (&'static str, [i64; 7]) = if 3 * e >= tt && 3 * g >= tt {
            // Case 1: neither guards nor exits are scarce.
            let (wgd, wed, wmd) = (s / 3, s / 3, s / 3);
            let wee = (s * (e + g + m)) / (3 * e);
            let wmg = (s * (2 * g - e - m)) / (3 * g);
            let w = [s - wmg, wgd, wmg, s - wee, wmd, wee, wed];
            if check(w) != Check::Ok {
                return Err(PathError::Unbalanced { case: "case 1", g: t.g, m: t.m, e: t.e, d: t.d });
            }
            ("case 1", w)
        } else if 3 * e < tt && 3 * g < tt {
            // Case 2: both are scarce; D is shared out between them.
            let (r, big) = (e.min(g), e.max(g));
            if r + d < big {
                let (wed, wgd) = if e < g { (s, 0) } else { (0, s) };
                ("case 2a", [s, wgd, 0, 0, 0, s, wed])
            } else {
                let wed = (s * (d - 2 * e + 4 * g - 2 * m)) / (3 * d);
                let w = [s, (s - wed) / 2, 0, (s * (g - m)) / e, (s - wed) / 2, (s * (e - g + m)) / e, wed];
                let (case, w) = if check(w) == Check::Ok {
                    ("case 2b1", w)
                } else {
                    let wed = (s * (d - 2 * e + g + m)) / (3 * d);
                    let wmd = ((s * (d - 2 * m + g + e)) / (3 * d)).max(0);
                    ("case 2b2", [s, s - wed - wmd, 0, 0, wmd, s, wed])
                };
                if !matches!(check(w), Check::Ok | Check::MidBalance) {
                    return Err(PathError::Unbalanced { case, g: t.g, m: t.m, e: t.e, d: t.d });
                }
                (case, w)
            }
        } else {
            // Case 3: exactly one of them is scarce.
            let scarce = e.min(g);
            if 3 * (scarce + d) < tt {
                if g < e {
                    let wme = if e < m { 0 } else { (s * (e - m)) / (2 * e) };
                    ("case 3a (G scarce)", [s, s, 0, wme, 0, s - wme, 0])
                } else {
                    let wmg = if g < m { 0 } else { (s * (g - m)) / (2 * g) };
                    ("case 3a (E scarce)", [s - wmg, 0, wmg, 0, 0, s, s])
                }
            } else {
                let (case, w) = if g < e {
                    let wgd = (s * (d - 2 * g + e + m)) / (3 * d);
                    let wee = (s * (e + m)) / (2 * e);
                    ("case 3b (G scarce)", [s, wgd, 0, s - wee, (s - wgd) / 2, wee, (s - wgd) / 2])
                } else {
                    let wed = (s * (d - 2 * e + g + m)) / (3 * d);
                    let wgg = (s * (g + m)) / (2 * g);
                    ("case 3b (E scarce)", [wgg, (s - wed) / 2, s - wgg, 0, (s - wed) / 2, s, wed])
                };
                if check(w) != Check::Ok {
                    return Err(PathError::Unbalanced { case, g: t.g, m: t.m, e: t.e, d: t.d });
                }
                (case, w)
            }
        };
        Ok(Self::from_seven(w, s))
    }

    /// The weights `method`'s directory authorities compute for relays with these totals:
    /// [`computed_v9`](Self::computed_v9) or [`computed_v10`](Self::computed_v10).
    pub fn computed(method: WeightsMethod, t: BandwidthTotals, scale: i64) -> Result<Self, PathError> {
        match method {
            WeightsMethod::V9 => Self::computed_v9(t, scale),
            WeightsMethod::V10 => Self::computed_v10(t, scale),
        }
    }

    /// The weights tor 0.2.2.10-alpha to 0.2.2.16-alpha's directory authorities put on the
    /// bandwidth-weights line (`networkstatus_compute_bw_weights_v9`, consensus method 9;
    /// the throttling paper's Shadow network ran 0.2.2.15-alpha), at weight scale `scale`.
    /// It differs from [`computed_v10`](Self::computed_v10) in case 1 and 3b (other
    /// formulas), in case 2b (another first try, and its fallback splits D so that guards
    /// and exits balance), and in that it always publishes: where a check fails it only
    /// logs, and every weight is clamped to `0..=scale`. `Wgm`, `Wmm`, `Wem`, `Weg` and
    /// `Wb*` as in v10.
    ///
    /// Errors: a class with no bandwidth (tor then publishes no line).
    pub fn computed_v9(t: BandwidthTotals, scale: i64) -> Result<Self, PathError> {
        if !(1..=i64::from(i32::MAX)).contains(&scale) {
            return Err(PathError::BadScale { scale });
        }
        let empty = [("Guard-only", t.g), ("unflagged", t.m), ("Exit-only", t.e), ("Guard+Exit", t.d)].into_iter().find(|c| c.1 == 0);
        if let Some((class, _)) = empty {
            return Err(PathError::EmptyClass { class, g: t.g, m: t.m, e: t.e, d: t.d });
        }
        // Every class is non-empty from here, so no division by zero (tor's `D == 0`
        // branches cannot be reached either).
        let (g, m, e, d) = (t.g as i64, t.m as i64, t.e as i64, t.d as i64);
        let tt = g + m + e + d;
        let s = scale;
        // Case 1 and case 3b with exits scarce share their formulas ("Wme*E = Wmd*D").
        let balanced_middle_exits = || {
            let wgg = (s * (d + e + g + m)) / (3 * g);
            let wmd = (s * (2 * d + 2 * e - g - m)) / (6 * d);
            let wme = (s * (2 * d + 2 * e - g - m)) / (6 * e);
            let wee = (s * (-2 * d + 4 * e + g + m)) / (6 * e);
            [wgg, 0, s - wgg, wme, wmd, wee, s - wmd]
        };
        // Case 2b's first try and case 3b with guards scarce share theirs.
        let balanced_guards = || {
            let wgd = (s * (d + e - 2 * g + m)) / (3 * d);
            let wmd = (s * (d + e + g - 2 * m)) / (6 * d);
            let wme = (s * (d + e + g - 2 * m)) / (6 * e);
            let wee = (s * (-d + 5 * e - g + 2 * m)) / (6 * e);
            [s, wgd, 0, wme, wmd, wee, s - wgd - wmd]
        };
        // [Wgg, Wgd, Wmg, Wme, Wmd, Wee, Wed]
        let w = if 3 * e >= tt && 3 * g >= tt {
            balanced_middle_exits()
        } else if 3 * e < tt && 3 * g < tt {
            let (r, big) = (e.min(g), e.max(g));
            if r + d < big {
                let (wed, wgd) = if e < g { (s, 0) } else { (0, s) };
                [s, wgd, 0, 0, 0, s, wed]
            } else {
                let w = balanced_guards();
                if check_weights(w, t, s) == Check::Ok {
                    w
                } else {
                    // "Case 2b (E=G)": D split so that the guard and exit positions balance.
                    let wgd = (s * (d + e - g)) / (2 * d);
                    [s, wgd, 0, 0, 0, s, s - wgd]
                }
            }
        } else if 3 * (e.min(g) + d) < tt {
            if g < e {
                let wme = if e < m { 0 } else { (s * (e - m)) / (2 * e) };
                [s, s, 0, wme, 0, s - wme, 0]
            } else {
                let wmg = if g < m { 0 } else { (s * (g - m)) / (2 * g) };
                [s - wmg, 0, wmg, 0, 0, s, s]
            }
        } else if g < e {
            balanced_guards()
        } else {
            balanced_middle_exits()
        };
        Ok(Self::from_seven(w.map(|x| x.clamp(0, s)), s))
    }

    /// The full set from (Wgg, Wgd, Wmg, Wme, Wmd, Wee, Wed), as tor writes the line:
    /// `Wgm = Wgg`, `Wmm = scale`, `Wem = Wee`, `Weg = Wed`, `Wb*` = `Wmd`, `Wme`, `Wmg`,
    /// `scale`.
    fn from_seven(w: [i64; 7], s: i64) -> Self {
        let [wgg, wgd, wmg, wme, wmd, wee, wed] = w;
        BandwidthWeights {
            wgg,
            wgm: wgg,
            wgd,
            wmg,
            wmm: s,
            wme,
            wmd,
            weg: wed,
            wem: wee,
            wee,
            wed,
            wbg: wmg,
            wbm: s,
            wbe: wme,
            wbd: wmd,
            scale: s,
        }
    }

    /// Builds the weights from `key=value` pairs as found on a consensus
    /// "bandwidth-weights" line (keys case-sensitive, e.g. `("Wgg", 5806)`), with weight
    /// scale `scale` (the consensus `bwweightscale` parameter; 10000 normally).
    ///
    /// `Wgg, Wgm, Wgd, Wmg, Wmm, Wme, Wmd, Weg, Wem, Wee, Wed` are required; `Wbg, Wbm, Wbe,
    /// Wbd` default to `scale`; any other key (`Wgb`, `Wmb`, `Web`, `Wdb`, future keys) is
    /// ignored. Every value must lie in `0..=scale`, and a key may appear only once.
    pub fn from_pairs<'a>(pairs: impl IntoIterator<Item = (&'a str, i64)>, scale: i64) -> Result<Self, PathError> {
        if !(1..=i64::from(i32::MAX)).contains(&scale) {
            return Err(PathError::BadScale { scale });
        }
        let mut found: [Option<i64>; 15] = [None; 15];
        for (key, value) in pairs {
            let slot = REQUIRED_KEYS.iter().chain(OPTIONAL_KEYS.iter()).position(|k| *k == key);
            let Some(slot) = slot else { continue };
            if value < 0 {
                return Err(PathError::BadWeight {
                    key: key.to_string(),
                    value,
                    hint: "bandwidth weights cannot be negative (tor would ignore the whole line)",
                });
            }
            if value > scale {
                return Err(PathError::BadWeight {
                    key: key.to_string(),
                    value,
                    hint: "a bandwidth weight cannot exceed the weight scale (10000 = weight 1)",
                });
            }
            if found[slot].replace(value).is_some() {
                return Err(PathError::DuplicateWeight { key: key.to_string() });
            }
        }
        for (i, key) in REQUIRED_KEYS.iter().enumerate() {
            if found[i].is_none() {
                return Err(PathError::MissingWeight { key });
            }
        }
        let get = |i: usize| found[i].unwrap_or(scale);
        Ok(BandwidthWeights {
            wgg: get(0),
            wgm: get(1),
            wgd: get(2),
            wmg: get(3),
            wmm: get(4),
            wme: get(5),
            wmd: get(6),
            weg: get(7),
            wem: get(8),
            wee: get(9),
            wed: get(10),
            wbg: get(11),
            wbm: get(12),
            wbe: get(13),
            wbd: get(14),
            scale,
        })
    }

    /// Checks a hand-built value: `scale` in 1..=`i32::MAX`, every weight in `0..=scale`.
    fn validate(&self) -> Result<(), PathError> {
        if !(1..=i64::from(i32::MAX)).contains(&self.scale) {
            return Err(PathError::BadScale { scale: self.scale });
        }
        let all = [
            ("Wgg", self.wgg),
            ("Wgm", self.wgm),
            ("Wgd", self.wgd),
            ("Wmg", self.wmg),
            ("Wmm", self.wmm),
            ("Wme", self.wme),
            ("Wmd", self.wmd),
            ("Weg", self.weg),
            ("Wem", self.wem),
            ("Wee", self.wee),
            ("Wed", self.wed),
            ("Wbg", self.wbg),
            ("Wbm", self.wbm),
            ("Wbe", self.wbe),
            ("Wbd", self.wbd),
        ];
        for (key, value) in all {
            if !(0..=self.scale).contains(&value) {
                return Err(PathError::BadWeight {
                    key: key.to_string(),
                    value,
                    hint: "each bandwidth weight must lie in 0..=scale (10000 = weight 1)",
                });
            }
        }
        Ok(())
    }

    /// The `W?x` weight (in `1/scale` units) of a relay with these flags in `pos`, or `None`
    /// if the relay is not eligible for `pos` at all.
    fn for_relay(&self, flags: RelayFlags, pos: Position) -> Option<i64> {
        if !flags.contains(RelayFlags::FAST) {
            return None;
        }
        let is_guard = flags.contains(RelayFlags::GUARD);
        let is_exit = flags.contains(RelayFlags::EXIT) && !flags.contains(RelayFlags::BAD_EXIT);
        match pos {
            Position::Guard if !is_guard => None,
            Position::Guard => Some(if is_exit { self.wgd } else { self.wgg }),
            Position::Middle => Some(match (is_guard, is_exit) {
                (true, true) => self.wmd,
                (true, false) => self.wmg,
                (false, true) => self.wme,
                (false, false) => self.wmm,
            }),
            Position::Exit if !is_exit => None,
            Position::Exit => Some(if is_guard { self.wed } else { self.wee }),
        }
    }
}

/// Errors from building weights or a [`PathSelector`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PathError {
    /// [`PathSelector::new`] was given no relays.
    #[error("relays: the relay list is empty; add at least one relay (three for a circuit)")]
    NoRelays,
    /// A required key is missing from the bandwidth-weights pairs.
    #[error(
        "bandwidth_weights.{key}: missing; a consensus bandwidth-weights line needs Wgg, Wgm, Wgd, \
         Wmg, Wmm, Wme, Wmd, Weg, Wem, Wee and Wed (omit the whole table to use uniform weights)"
    )]
    MissingWeight {
        /// The missing key, e.g. `"Wgd"`.
        key: &'static str,
    },
    /// A weight is outside `0..=scale`.
    #[error("bandwidth_weights.{key}: {value} is out of range: {hint}")]
    BadWeight {
        /// The offending key, e.g. `"Wgg"`.
        key: String,
        /// Its value, in `1/scale` units.
        value: i64,
        /// What is allowed.
        hint: &'static str,
    },
    /// A key appears more than once.
    #[error("bandwidth_weights.{key}: given more than once; keep a single value")]
    DuplicateWeight {
        /// The repeated key.
        key: String,
    },
    /// The weight scale is outside tor's `bwweightscale` range.
    #[error("bandwidth_weights.scale: {scale} is out of range; bwweightscale must be in 1..=2147483647 (normally 10000)")]
    BadScale {
        /// The rejected scale.
        scale: i64,
    },
    /// Tor's authorities compute no weights when a class of relays has no bandwidth.
    #[error(
        "computed bandwidth_weights: {class} relays have no bandwidth (G={g}, M={m}, E={e}, D={d}); \
         tor's directory authorities compute weights only when Guard-only, unflagged, Exit-only \
         and Guard+Exit relays all have some; give the weights as a table or leave them out (uniform)"
    )]
    EmptyClass {
        /// The first empty class, e.g. `"Guard+Exit"`.
        class: &'static str,
        g: u64,
        m: u64,
        e: u64,
        d: u64,
    },
    /// The computed weights fail tor's own balance checks.
    #[error("computed bandwidth_weights: tor's authorities find no balanced weights for G={g}, M={m}, E={e}, D={d} ({case})")]
    Unbalanced { case: &'static str, g: u64, m: u64, e: u64, d: u64 },
}

/// Which directory authorities' formulas compute the bandwidth weights.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WeightsMethod {
    /// Consensus method 9 ([`BandwidthWeights::computed_v9`]): tor 0.2.2.10-alpha to
    /// 0.2.2.16-alpha.
    V9,
    /// Consensus method 10 and later ([`BandwidthWeights::computed_v10`]).
    V10,
}

/// What `networkstatus_check_weights` finds of weights (Wgg, Wgd, Wmg, Wme, Wmd, Wee, Wed)
/// with tor's margin 10 and balancing on: no error, or the error's kind (only a
/// middle-balance miss is told apart: tor's case 2b accepts it).
#[derive(PartialEq)]
enum Check {
    Ok,
    MidBalance,
    Other,
}

fn check_weights(w: [i64; 7], t: BandwidthTotals, s: i64) -> Check {
    let (g, m, e, d) = (t.g as i64, t.m as i64, t.e as i64, t.d as i64);
    let tt = g + m + e + d;
    let [wgg, wgd, wmg, wme, wmd, wee, wed] = w;
    let near = |a: i64, b: i64, margin: i64| (a - b).abs() <= margin;
    let margin = 10;
    if !near(wed + wmd + wgd, s, margin) || !near(wmg + wgg, s, margin) || !near(wme + wee, s, margin) {
        return Check::Other;
    }
    if w.iter().any(|&x| !(0..=s).contains(&x)) {
        return Check::Other;
    }
    // 128-bit products: weights times bandwidth totals may pass 2^63 at large scales.
    let (g, m, e, d, tt) = (g as i128, m as i128, e as i128, d as i128, tt as i128);
    let [wgg, wgd, wmg, wme, wmd, wee, wed] = w.map(|x| x as i128);
    let bal = (margin as i128 * tt) / 3;
    let near128 = |a: i128, b: i128| (a - b).abs() <= bal;
    if !near128(wgg * g + wgd * d, wee * e + wed * d) {
        return Check::Other;
    }
    if !near128(wgg * g + wgd * d, m * s as i128 + wmd * d + wme * e + wmg * g) {
        return Check::MidBalance;
    }
    Check::Ok
}

/// Total consensus weight per relay class, as tor's directory authorities sum it for the
/// bandwidth-weights line (dir-spec 3.8.3; `update_total_bandwidth_weights`): `g` Guard
/// only, `m` neither, `e` Exit only, `d` Guard and Exit. A BadExit relay does not count as
/// an exit (tor bug 2203).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BandwidthTotals {
    pub g: u64,
    pub m: u64,
    pub e: u64,
    pub d: u64,
}

impl BandwidthTotals {
    /// Sums `relays` by class.
    pub fn of<'a>(relays: impl IntoIterator<Item = &'a RelayInfo>) -> Self {
        let mut t = BandwidthTotals::default();
        for r in relays {
            let guard = r.flags.contains(RelayFlags::GUARD);
            let exit = r.flags.contains(RelayFlags::EXIT) && !r.flags.contains(RelayFlags::BAD_EXIT);
            let class = match (guard, exit) {
                (true, true) => &mut t.d,
                (true, false) => &mut t.g,
                (false, true) => &mut t.e,
                (false, false) => &mut t.m,
            };
            *class += r.bandwidth;
        }
        t
    }
}

/// Precomputed weighted selection tables, one per [`Position`]: exact integer weights
/// (`bandwidth × Wxy`, in KB/s × `1/scale`) and their running sums, so a draw is one
/// uniform integer plus a binary search (O(log n)).
#[derive(Clone, Debug)]
pub struct PathSelector {
    relays: Vec<RelayInfo>,
    weights: BandwidthWeights,
    /// `weight[p][i]`: weight of relay `i` in position `p`, 0 if ineligible.
    weight: [Vec<u128>; 3],
    /// `cumulative[p][i]` = `weight[p][0] + … + weight[p][i]`.
    cumulative: [Vec<u128>; 3],
}

/// Rejection-sampling attempts before [`PathSelector::choose`] falls back to a linear scan.
const MAX_REJECTIONS: usize = 32;

impl PathSelector {
    /// Builds the selection tables for `relays` (relay `i` is index `i` in every method).
    ///
    /// Relays are assumed `Running` and `Valid`. A position no relay can serve is not an
    /// error here: [`choose`](Self::choose) returns `None` for it. Errors: an empty relay
    /// list, or `weights` outside their ranges (scale in 1..=`i32::MAX`, weights in
    /// `0..=scale`).
    pub fn new(relays: &[RelayInfo], weights: BandwidthWeights) -> Result<Self, PathError> {
        if relays.is_empty() {
            return Err(PathError::NoRelays);
        }
        weights.validate()?;
        let mut weight: [Vec<u128>; 3] = Default::default();
        let mut cumulative: [Vec<u128>; 3] = Default::default();
        for pos in Position::ALL {
            let p = pos.index();
            let mut sum: u128 = 0;
            for r in relays {
                // bandwidth < 2^64, w <= 2^31: each product < 2^95, so the sum cannot
                // overflow below 2^32 relays; saturate rather than panic beyond that.
                let w = weights.for_relay(r.flags, pos).map_or(0, |w| u128::from(r.bandwidth) * w as u128);
                sum = sum.saturating_add(w);
                weight[p].push(w);
                cumulative[p].push(sum);
            }
        }
        Ok(PathSelector { relays: relays.to_vec(), weights, weight, cumulative })
    }

    /// Number of relays.
    pub fn len(&self) -> usize {
        self.relays.len()
    }

    /// Always false: a selector has at least one relay.
    pub fn is_empty(&self) -> bool {
        self.relays.is_empty()
    }

    /// The relays, in index order.
    pub fn relays(&self) -> &[RelayInfo] {
        &self.relays
    }

    /// The bandwidth weights in use.
    pub fn bandwidth_weights(&self) -> &BandwidthWeights {
        &self.weights
    }

    /// Weight of relay `relay` in position `pos`, in consensus-bandwidth units (KB/s):
    /// `bandwidth × Wxy / scale`, as in tor's `compute_weighted_bandwidths`:
    ///
    /// * every position needs [`RelayFlags::FAST`] (tor's `need_capacity`); else 0;
    /// * a relay with `BadExit` is treated as a non-exit;
    /// * **Guard**: needs `Guard`; `Wgd` if also an exit, else `Wgg`;
    /// * **Middle**: `Wmd` (Guard+Exit), `Wmg` (Guard), `Wme` (Exit), `Wmm` (neither);
    /// * **Exit**: needs `Exit` and not `BadExit`; `Wed` if also a guard, else `Wee`.
    ///
    /// Returns 0.0 for an out-of-range index.
    pub fn weight(&self, relay: usize, pos: Position) -> f64 {
        match self.weight[pos.index()].get(relay) {
            Some(&w) => w as f64 / self.weights.scale as f64,
            None => 0.0,
        }
    }

    /// Sum of [`weight`](Self::weight) over all relays for `pos`, in KB/s.
    pub fn total_weight(&self, pos: Position) -> f64 {
        self.total(pos) as f64 / self.weights.scale as f64
    }

    fn total(&self, pos: Position) -> u128 {
        self.cumulative[pos.index()].last().copied().unwrap_or(0)
    }

    /// True if `relay` has the flags `pos` needs (ignoring its weight).
    pub fn is_eligible(&self, relay: usize, pos: Position) -> bool {
        self.relays.get(relay).is_some_and(|r| self.weights.for_relay(r.flags, pos).is_some())
    }

    /// Chooses a relay for `pos` with probability proportional to its
    /// [`weight`](Self::weight), never returning an index in `exclude` (the relays already
    /// on the path; out-of-range indices there are ignored) or a relay in the same /16 as
    /// one of them (`EnforceDistinctSubnets`). Tor also excludes relays of the same
    /// declared family; that is not modelled.
    ///
    /// Returns `None` if no eligible, non-excluded relay has positive weight. (Tor's
    /// `choose_array_element_by_weight` picks uniformly when all weights are 0; we don't,
    /// so a zero weight reliably keeps a class out of a position.)
    ///
    /// Cost: O(log n) per draw; an excluded pick is re-drawn (rejection sampling, which
    /// keeps the exact conditional distribution) up to 32 times, then one O(n) scan over
    /// the remaining weight finishes the job, so it always terminates.
    pub fn choose<R: rand::Rng + ?Sized>(&self, pos: Position, rng: &mut R, exclude: &[usize]) -> Option<usize> {
        self.choose_apart(pos, rng, exclude, exclude)
    }

    /// [`choose`](Self::choose) with the two exclusions apart: never a relay in `exclude`,
    /// nor one in the /16 of a relay in `subnets_of`. `choose(pos, rng, x)` is
    /// `choose_apart(pos, rng, x, x)`, draw for draw. With `subnets_of` empty, relays are
    /// excluded by identity only (tor 0.4.8's guard sampling, which has no /16 rule).
    pub fn choose_apart<R: rand::Rng + ?Sized>(
        &self,
        pos: Position,
        rng: &mut R,
        exclude: &[usize],
        subnets_of: &[usize],
    ) -> Option<usize> {
        let p = pos.index();
        let total = self.total(pos);
        if total == 0 {
            return None;
        }
        let cumulative = &self.cumulative[p];
        for _ in 0..MAX_REJECTIONS {
            let x = rng.random_range(0..total);
            // First index whose running sum exceeds x; zero-weight relays are never hit.
            let i = cumulative.partition_point(|&c| c <= x);
            if !self.excluded(i, exclude, subnets_of) {
                return Some(i);
            }
        }
        // Linear fallback over what is left after exclusion.
        let weight = &self.weight[p];
        let remaining: u128 = weight
            .iter()
            .enumerate()
            .filter(|&(i, _)| !self.excluded(i, exclude, subnets_of))
            .fold(0u128, |acc, (_, &w)| acc.saturating_add(w));
        if remaining == 0 {
            return None;
        }
        let mut x = rng.random_range(0..remaining);
        for (i, &w) in weight.iter().enumerate() {
            if w == 0 || self.excluded(i, exclude, subnets_of) {
                continue;
            }
            if x < w {
                return Some(i);
            }
            x -= w;
        }
        None // unreachable: x < remaining = sum of the weights walked
    }

    /// Whether `relay` is in `exclude` or shares a known /16 with a relay in `subnets_of`.
    fn excluded(&self, relay: usize, exclude: &[usize], subnets_of: &[usize]) -> bool {
        exclude.contains(&relay)
            || self.relays[relay]
                .subnet
                .is_some_and(|s| subnets_of.iter().any(|&x| self.relays.get(x).is_some_and(|r| r.subnet == Some(s))))
    }

    /// Whether relays `a` and `b` may not share a path: the same relay, or both in one
    /// known /16 (tor's `nodes_in_same_family` without declared families).
    pub fn conflicts(&self, a: usize, b: usize) -> bool {
        self.excluded(a, &[b], &[b])
    }

    /// The guard of a circuit whose `exit` is chosen, as tor 0.4.8's
    /// `select_primary_guard_for_circuit` picks it: of the client's first `primaries`
    /// guards (`guards` in sampled order; `guard-n-primary-guards`), the first `to_use`
    /// (`NumEntryGuards`, `guard-n-primary-guards-to-use`) that do not
    /// [`conflict`](Self::conflicts) with the exit, one of them uniformly. When every
    /// primary conflicts: the first further guard of `guards` that does not
    /// (`select_filtered_guard_for_circuit`, in sampled order), no draw. `None`: no guard
    /// of `guards` fits (the caller samples another). Tor 0.2.2's `choose_random_entry` is
    /// the case `primaries == to_use`, every guard (NumEntryGuards 3) in use.
    pub fn guard_for_exit<R: rand::Rng + ?Sized>(
        &self,
        rng: &mut R,
        guards: &[usize],
        primaries: usize,
        to_use: usize,
        exit: usize,
    ) -> Option<usize> {
        let split = primaries.min(guards.len());
        let usable: Vec<usize> = guards[..split].iter().copied().filter(|&g| !self.conflicts(g, exit)).take(to_use.max(1)).collect();
        if !usable.is_empty() {
            return Some(usable[rng.random_range(0..usable.len())]);
        }
        guards[split..].iter().copied().find(|&g| !self.conflicts(g, exit))
    }

    /// A path entering through `first` whatever its flags (a bridge, or a client's own
    /// relay): exit and middle chosen as usual, both different from `first`. `Err` names
    /// the position no relay was left for.
    pub fn choose_path_via<R: rand::Rng + ?Sized>(&self, rng: &mut R, first: usize) -> Result<[usize; 3], Position> {
        let exit = self.choose(Position::Exit, rng, &[first]).ok_or(Position::Exit)?;
        let middle = self.choose(Position::Middle, rng, &[first, exit]).ok_or(Position::Middle)?;
        Ok([first, middle, exit])
    }

    /// Chooses a full path, returned as `[guard, middle, exit]` relay indices, all distinct
    /// and in distinct known /16s.
    ///
    /// Order follows tor's `onion_pick_cpath_exit` then `onion_extend_cpath`: the exit is
    /// chosen first, then the guard (excluding the exit), then the middle (excluding both).
    /// With a persistent `guard` given, it is used as the first hop and excluded from the
    /// exit and middle choices (guard-first: tor would instead skip a primary guard that
    /// conflicts with the chosen exit, [`guard_for_exit`](Self::guard_for_exit)).
    /// `Err(Position::Guard)` if `guard` is out of range or lacks the Guard/Fast flags;
    /// otherwise `Err` names the first position no eligible relay was left for.
    pub fn choose_path<R: rand::Rng + ?Sized>(&self, rng: &mut R, guard: Option<usize>) -> Result<[usize; 3], Position> {
        match guard {
            Some(g) if !self.is_eligible(g, Position::Guard) => Err(Position::Guard),
            Some(g) => self.choose_path_via(rng, g),
            None => {
                let exit = self.choose(Position::Exit, rng, &[]).ok_or(Position::Exit)?;
                let g = self.choose(Position::Guard, rng, &[exit]).ok_or(Position::Guard)?;
                let middle = self.choose(Position::Middle, rng, &[g, exit]).ok_or(Position::Middle)?;
                Ok([g, middle, exit])
            }
        }
    }
}

#[cfg(test)]
mod tests {
    /// (Wgg, Wgd, Wmg, Wme, Wmd, Wee, Wed) of computed weights.
    fn seven(w: &BandwidthWeights) -> [i64; 7] {
        [w.wgg, w.wgd, w.wmg, w.wme, w.wmd, w.wee, w.wed]
    }

    #[test]
    fn computed_weights_match_the_2022_consensus_line() {
        // Totals of the Running relays of ../shared/data's 2022-11-19 10:00 consensus
        // (w Bandwidth=, BadExit not an exit): G 34447990, M 31761796, E 7302140,
        // D 20603230. Exits are scarce and E + D < T/3: case 3a. Its line says Wgg=9611
        // Wgd=0 Wmg=389 Wme=0 Wmd=0 Wee=10000 Wed=10000, and Wbd=0 Wbe=0 Wbg=389 Wbm=10000.
        let t = BandwidthTotals { g: 34_447_990, m: 31_761_796, e: 7_302_140, d: 20_603_230 };
        let w = BandwidthWeights::computed_v10(t, 10_000).unwrap();
        assert_eq!(seven(&w), [9611, 0, 389, 0, 0, 10_000, 10_000]);
        assert_eq!((w.wbd, w.wbe, w.wbg, w.wbm), (0, 0, 389, 10_000));
        assert_eq!((w.wgm, w.wmm, w.wem, w.weg), (9611, 10_000, 10_000, 10_000));
    }

    #[test]
    fn computed_weights_for_the_throttling_relays() {
        // The 50 relays of the throttling reproduction (2010 consensus, which has no
        // weights line): G 16060, M 4567, E 2723, D 13105, T 36455. E < T/3 <= E + D and
        // G >= T/3: case 3b, exits scarce. By hand, with tor's integer division:
        // Wed = 10000 (D - 2E + G + M) / 3D = 282860000 / 39315 = 7194;
        // Wgg = 10000 (G + M) / 2G = 206270000 / 32120 = 6421; Wmg = 3579;
        // Wgd = Wmd = (10000 - 7194) / 2 = 1403; Wee = 10000, Wme = 0.
        let t = BandwidthTotals { g: 16_060, m: 4_567, e: 2_723, d: 13_105 };
        let w = BandwidthWeights::computed_v10(t, 10_000).unwrap();
        assert_eq!(seven(&w), [6421, 1403, 3579, 0, 1403, 10_000, 7194]);
    }

    #[test]
    fn computed_weights_when_nothing_is_scarce() {
        // Case 1, G = E = 40, M = D = 10: Wgd = Wmd = Wed = 3333; Wee = 10000 * 90 / 120 =
        // 7500, Wme = 2500; Wmg = 10000 * (80 - 50) / 120 = 2500, Wgg = 7500.
        let t = BandwidthTotals { g: 40, m: 10, e: 40, d: 10 };
        let w = BandwidthWeights::computed_v10(t, 10_000).unwrap();
        assert_eq!(seven(&w), [7500, 3333, 2500, 2500, 3333, 7500, 3333]);
    }

    #[test]
    fn computed_weights_when_both_are_scarce() {
        // Case 2a: G = 10, E = 20, D = 5, M = 65: R + D = 15 < S = 20, guards scarcer:
        // every Guard+Exit relay goes to the guard position.
        let t = BandwidthTotals { g: 10, m: 65, e: 20, d: 5 };
        let w = BandwidthWeights::computed_v10(t, 10_000).unwrap();
        assert_eq!(seven(&w), [10_000, 10_000, 0, 0, 0, 10_000, 0]);
    }

    #[test]
    fn v9_weights_for_the_throttling_relays_put_exits_in_the_middle() {
        // The same totals under consensus method 9 (tor 0.2.2.15-alpha): case 3b, exits
        // scarce, with v9's "Wme*E = Wmd*D" formulas. By hand:
        // Wgg = 10000 T / 3G = 364550000 / 48180 = 7566, Wmg = 2434;
        // Wmd = 10000 (2D + 2E - G - M) / 6D = 110290000 / 78630 = 1402, Wed = 8598;
        // Wme = 110290000 / 6E = 110290000 / 16338 = 6750;
        // Wee = 10000 (-2D + 4E + G + M) / 6E = 53090000 / 16338 = 3249; Wgd = 0.
        let t = BandwidthTotals { g: 16_060, m: 4_567, e: 2_723, d: 13_105 };
        let w = BandwidthWeights::computed_v9(t, 10_000).unwrap();
        assert_eq!(seven(&w), [7566, 0, 2434, 6750, 1402, 3249, 8598]);
        assert_eq!((w.wgm, w.wmm, w.wem, w.weg), (7566, 10_000, 3249, 8598));
    }

    #[test]
    fn v9_weights_when_nothing_is_scarce() {
        // Case 1, G = E = 40, M = D = 10, T = 100: Wgg = 10000 * 100 / 120 = 8333;
        // Wmd = 10000 * 50 / 60 = 8333; Wme = 500000 / 240 = 2083;
        // Wee = 10000 * 190 / 240 = 7916; Wgd = 0, Wmg = 1667, Wed = 1667.
        let t = BandwidthTotals { g: 40, m: 10, e: 40, d: 10 };
        let w = BandwidthWeights::computed_v9(t, 10_000).unwrap();
        assert_eq!(seven(&w), [8333, 0, 1667, 2083, 8333, 7916, 1667]);
    }

    #[test]
    fn v9_weights_publish_where_v10_finds_none() {
        // The throttling paper's network as Shadow ran it (the 2010 decile draw, flags voted,
        // the authority a 102400 KB/s Guard+Exit): G 18349, M 94169, E 507, D 135383, T
        // 248408. Both scarce, R + D > S: case 2b. The first try has
        // Wmd = 10000 (D + E + G - 2M) / 6D = -340990000 / 812298 = -419, out of range, so
        // tor falls back to "Case 2b (E=G)": Wgd = 10000 (D + E - G) / 2D =
        // 1175410000 / 270766 = 4341, Wed = 5659, Wgg = Wee = 10000, no middle use of guards
        // or exits. v10's formulas fail its balance check here, and it publishes nothing.
        let t = BandwidthTotals { g: 18_349, m: 94_169, e: 507, d: 135_383 };
        let w = BandwidthWeights::computed_v9(t, 10_000).unwrap();
        assert_eq!(seven(&w), [10_000, 4341, 0, 0, 0, 10_000, 5659]);
        let err = BandwidthWeights::computed_v10(t, 10_000).unwrap_err().to_string();
        assert!(err.contains("no balanced weights") && err.contains("case 2b2"), "{err}");
    }

    #[test]
    fn computed_weights_case_2b1() {
        // Both scarce (3G = 96, 3E = 90 < T = 101), R + D = 59 >= S = 32, first try:
        // Wed = 10000 (D - 2E + 4G - 2M) / 3D = 770000 / 87 = 8850; Wgd = Wmd =
        // (10000 - 8850) / 2 = 575; Wme = 10000 (G - M) / E = 220000 / 30 = 7333;
        // Wee = 10000 (E - G + M) / E = 80000 / 30 = 2666; Wgg = 10000, Wmg = 0. Sums within
        // the margin (Wme + Wee = 9999); Wgg G + Wgd D = 336675 against Wee E + Wed D =
        // 336630 and the middle's 336665, within 10 T / 3 = 336.
        let t = BandwidthTotals { g: 32, m: 10, e: 30, d: 29 };
        let w = BandwidthWeights::computed_v10(t, 10_000).unwrap();
        assert_eq!(seven(&w), [10_000, 575, 0, 7333, 575, 2666, 8850]);
    }

    #[test]
    fn computed_weights_at_the_case_boundaries() {
        // E = G = T/3 exactly (33 of 99) is case 1 (tor: `E >= T/3 && G >= T/3`, as 3E >= T):
        // Wgd = Wmd = Wed = 3333; Wee = 10000 (E + G + M) / 3E = 690000 / 99 = 6969,
        // Wme = 3031; Wmg = 10000 (2G - E - M) / 3G = 300000 / 99 = 3030, Wgg = 6970.
        let t = BandwidthTotals { g: 33, m: 3, e: 33, d: 30 };
        let w = BandwidthWeights::computed_v10(t, 10_000).unwrap();
        assert_eq!(seven(&w), [6970, 3333, 3030, 3031, 3333, 6969, 3333]);
        // Both scarce with R + D = S (10 + 10 = 20) is case 2b, not 2a (tor: `R+D < S`);
        // both of its tries leave Wgd out of range, so tor publishes no weights.
        let t = BandwidthTotals { g: 10, m: 60, e: 20, d: 10 };
        let err = BandwidthWeights::computed_v10(t, 10_000).unwrap_err().to_string();
        assert!(err.contains("case 2b2"), "{err}");
        // Guards scarce with 3 (G + D) = T exactly (G 10, D 20, T 90) is case 3b, not 3a
        // (tor: `3*(S+D) < T`). The two agree but for rounding: 3b's Wee = 10000 (E + M) / 2E =
        // 600000 / 70 = 8571 and Wme = 1429, where 3a would round Wme down to 1428.
        let t = BandwidthTotals { g: 10, m: 25, e: 35, d: 20 };
        let w = BandwidthWeights::computed_v10(t, 10_000).unwrap();
        assert_eq!(seven(&w), [10_000, 10_000, 0, 1429, 0, 8571, 0]);
    }

    #[test]
    fn computed_weights_when_guards_alone_are_scarce() {
        // Case 3a: G = 10, D = 5, E = 60, M = 25: 3G < T = 100 <= 3E and 3 (G + D) < T.
        // Guards and Guard+Exit relays go to the guard position; Wme = 10000 (E - M) / 2E =
        // 350000 / 120 = 2916, Wee = 7084.
        let t = BandwidthTotals { g: 10, m: 25, e: 60, d: 5 };
        let w = BandwidthWeights::computed_v10(t, 10_000).unwrap();
        assert_eq!(seven(&w), [10_000, 10_000, 0, 2916, 0, 7084, 0]);
        // Case 3b: G = 20, D = 30, E = 40, M = 10: 3G < T = 100 <= 3E, 3 (G + D) >= T.
        // Wgd = 10000 (D - 2G + E + M) / 3D = 400000 / 90 = 4444; Wee = 10000 (E + M) / 2E =
        // 6250, Wme = 3750; Wmd = Wed = (10000 - 4444) / 2 = 2778.
        let t = BandwidthTotals { g: 20, m: 10, e: 40, d: 30 };
        let w = BandwidthWeights::computed_v10(t, 10_000).unwrap();
        assert_eq!(seven(&w), [10_000, 4444, 0, 3750, 2778, 6250, 2778]);
        // Consensus method 9 on the same totals (its "balanced guards" formulas, as the
        // code has them): Wgd = 10000 (D + E - 2G + M) / 3D = 4444; Wmd = 10000 (D + E + G
        // - 2M) / 6D = 700000 / 180 = 3888; Wme = 700000 / 6E = 2916; Wee = 10000 (-D + 5E
        // - G + 2M) / 6E = 1700000 / 240 = 7083; Wed = 10000 - 4444 - 3888 = 1668.
        let w = BandwidthWeights::computed_v9(t, 10_000).unwrap();
        assert_eq!(seven(&w), [10_000, 4444, 0, 2916, 3888, 7083, 1668]);
    }

    #[test]
    fn v9_weights_need_every_class_too() {
        let t = BandwidthTotals { g: 10, m: 0, e: 20, d: 5 };
        let err = BandwidthWeights::computed_v9(t, 10_000).unwrap_err().to_string();
        assert!(err.contains("unflagged relays have no bandwidth"), "{err}");
    }

    #[test]
    fn computed_weights_need_every_class() {
        let t = BandwidthTotals { g: 10, m: 65, e: 20, d: 0 };
        let err = BandwidthWeights::computed_v10(t, 10_000).unwrap_err().to_string();
        assert!(err.contains("Guard+Exit relays have no bandwidth"), "{err}");
    }

    #[test]
    fn totals_count_bad_exits_by_their_guard_flag() {
        let info = |bw, flags| RelayInfo { nickname: String::new(), bandwidth: bw, flags, subnet: None };
        let (g, e, b) = (RelayFlags::GUARD, RelayFlags::EXIT, RelayFlags::BAD_EXIT);
        let relays = [info(1, g), info(2, RelayFlags::EMPTY), info(4, e), info(8, g | e), info(16, e | b), info(32, g | e | b)];
        assert_eq!(BandwidthTotals::of(&relays), BandwidthTotals { g: 1 + 32, m: 2 + 16, e: 4, d: 8 });
    }

    use super::*;
    use proptest::prelude::*;
    use rand::rngs::StdRng;
    use rand::SeedableRng;

    const G: RelayFlags = RelayFlags::GUARD;
    const E: RelayFlags = RelayFlags::EXIT;
    const F: RelayFlags = RelayFlags::FAST;
    const B: RelayFlags = RelayFlags::BAD_EXIT;

    fn relay(nickname: &str, bandwidth: u64, flags: RelayFlags) -> RelayInfo {
        RelayInfo { nickname: nickname.to_string(), bandwidth, flags, subnet: None }
    }

    /// The 2022 consensus bandwidth-weights line (includes keys we ignore).
    const W2022: &[(&str, i64)] = &[
        ("Wbd", 0),
        ("Wbe", 0),
        ("Wbg", 4194),
        ("Wbm", 10000),
        ("Wdb", 10000),
        ("Web", 10000),
        ("Wed", 10000),
        ("Wee", 10000),
        ("Weg", 10000),
        ("Wem", 10000),
        ("Wgb", 10000),
        ("Wgd", 0),
        ("Wgg", 5806),
        ("Wgm", 5806),
        ("Wmb", 10000),
        ("Wmd", 0),
        ("Wme", 0),
        ("Wmg", 4194),
        ("Wmm", 10000),
    ];

    fn w2022() -> BandwidthWeights {
        BandwidthWeights::from_pairs(W2022.iter().copied(), 10_000).expect("2022 weights parse")
    }

    /// Distinct weights so any class/position mix-up shows.
    fn hand_weights() -> BandwidthWeights {
        BandwidthWeights {
            wgg: 6000,
            wgm: 5500,
            wgd: 2000,
            wmg: 4000,
            wmm: 10000,
            wme: 1000,
            wmd: 3000,
            weg: 8000,
            wem: 8500,
            wee: 9000,
            wed: 7000,
            ..BandwidthWeights::uniform()
        }
    }

    fn five_relays() -> Vec<RelayInfo> {
        vec![
            relay("guard", 100, G | F),
            relay("guardexit", 200, G | E | F),
            relay("exit", 300, E | F),
            relay("middle", 400, F),
            relay("guardbadexit", 500, G | E | B | F),
        ]
    }

    #[test]
    fn hand_worked_weights_five_relays() {
        let sel = PathSelector::new(&five_relays(), hand_weights()).unwrap();
        // (relay, guard, middle, exit), computed by hand: bw × W / 10000.
        let expected: [(usize, f64, f64, f64); 5] = [
            (0, 100.0 * 0.6, 100.0 * 0.4, 0.0),         // Guard only: Wgg, Wmg, not an exit
            (1, 200.0 * 0.2, 200.0 * 0.3, 200.0 * 0.7), // Guard+Exit: Wgd, Wmd, Wed
            (2, 0.0, 300.0 * 0.1, 300.0 * 0.9),         // Exit only: no Guard, Wme, Wee
            (3, 0.0, 400.0, 0.0),                       // neither: Wmm
            (4, 500.0 * 0.6, 500.0 * 0.4, 0.0),         // BadExit counts as non-exit: Wgg, Wmg, never exit
        ];
        let pos = [Position::Guard, Position::Middle, Position::Exit];
        for (i, g, m, e) in expected {
            for (p, want) in pos.iter().zip([g, m, e]) {
                let got = sel.weight(i, *p);
                assert!((got - want).abs() < 1e-9, "relay {i} {p:?}: got {got}, want {want}");
            }
        }
        assert_eq!(sel.weight(0, Position::Guard), 60.0);
        assert_eq!(sel.weight(1, Position::Exit), 140.0);
        assert_eq!(sel.weight(4, Position::Middle), 200.0);
        assert!((sel.total_weight(Position::Guard) - 400.0).abs() < 1e-9);
        assert!((sel.total_weight(Position::Middle) - 730.0).abs() < 1e-9);
        assert!((sel.total_weight(Position::Exit) - 410.0).abs() < 1e-9);
        assert_eq!(sel.weight(99, Position::Guard), 0.0);
        assert_eq!(sel.len(), 5);
        assert!(!sel.is_empty());
    }

    #[test]
    fn fast_flag_required_everywhere() {
        let relays = vec![relay("slow", 1000, G | E), relay("fast", 10, G | E | F)];
        let sel = PathSelector::new(&relays, BandwidthWeights::uniform()).unwrap();
        for p in Position::ALL {
            assert_eq!(sel.weight(0, p), 0.0, "{p:?}");
            assert!(!sel.is_eligible(0, p));
            assert_eq!(sel.weight(1, p), 10.0);
        }
        let mut rng = StdRng::seed_from_u64(1);
        for _ in 0..100 {
            assert_eq!(sel.choose(Position::Middle, &mut rng, &[]), Some(1));
        }
    }

    #[test]
    fn weights_2022_vector() {
        let w = w2022();
        assert_eq!((w.wgg, w.wgm, w.wgd), (5806, 5806, 0));
        assert_eq!((w.wmg, w.wmm, w.wme, w.wmd), (4194, 10000, 0, 0));
        assert_eq!((w.weg, w.wem, w.wee, w.wed), (10000, 10000, 10000, 10000));
        assert_eq!((w.wbg, w.wbm, w.wbe, w.wbd), (4194, 10000, 0, 0));
        assert_eq!(w.scale, 10000);
        let sel = PathSelector::new(&five_relays(), w).unwrap();
        // Guard+Exit relays are saved for the exit position: Wgd = Wmd = 0.
        assert_eq!(sel.weight(1, Position::Guard), 0.0);
        assert_eq!(sel.weight(1, Position::Middle), 0.0);
        assert_eq!(sel.weight(1, Position::Exit), 200.0);
        assert!((sel.weight(0, Position::Guard) - 58.06).abs() < 1e-9);
        assert!((sel.weight(0, Position::Middle) - 41.94).abs() < 1e-9);
        assert_eq!(sel.weight(2, Position::Middle), 0.0);
        assert_eq!(sel.weight(3, Position::Middle), 400.0);
    }

    #[test]
    fn uniform_matches_equivalent_pairs() {
        let pairs: Vec<(&str, i64)> = REQUIRED_KEYS.iter().map(|k| (*k, 10_000)).collect();
        let parsed = BandwidthWeights::from_pairs(pairs, 10_000).unwrap();
        assert_eq!(parsed, BandwidthWeights::uniform());
        assert_eq!(BandwidthWeights::default(), BandwidthWeights::uniform());
        let sel = PathSelector::new(&five_relays(), BandwidthWeights::uniform()).unwrap();
        assert_eq!(sel.weight(1, Position::Guard), 200.0);
        assert_eq!(sel.weight(2, Position::Middle), 300.0);
        assert_eq!(sel.weight(4, Position::Exit), 0.0);
    }

    #[test]
    fn from_pairs_other_scale() {
        let pairs: Vec<(&str, i64)> = REQUIRED_KEYS.iter().map(|k| (*k, 50)).collect();
        let w = BandwidthWeights::from_pairs(pairs, 100).unwrap();
        assert_eq!(w.wbg, 100, "optional keys default to the scale");
        let sel = PathSelector::new(&[relay("m", 1000, F)], w).unwrap();
        assert_eq!(sel.weight(0, Position::Middle), 500.0);
    }

    #[test]
    fn error_cases() {
        let missing: Vec<(&str, i64)> = W2022.iter().copied().filter(|(k, _)| *k != "Wgd").collect();
        let err = BandwidthWeights::from_pairs(missing, 10_000).unwrap_err();
        assert_eq!(err, PathError::MissingWeight { key: "Wgd" });
        assert!(err.to_string().contains("Wgd"));

        let mut neg = W2022.to_vec();
        neg.push(("Wmm", -1));
        neg.retain(|&(k, v)| k != "Wmm" || v < 0);
        let err = BandwidthWeights::from_pairs(neg, 10_000).unwrap_err();
        assert!(matches!(&err, PathError::BadWeight { key, value: -1, .. } if key == "Wmm"), "{err}");
        assert!(err.to_string().contains("negative"));

        let mut big = W2022.to_vec();
        big.retain(|&(k, _)| k != "Wee");
        big.push(("Wee", 10_001));
        let err = BandwidthWeights::from_pairs(big, 10_000).unwrap_err();
        assert!(matches!(&err, PathError::BadWeight { key, value: 10_001, .. } if key == "Wee"));

        let mut dup = W2022.to_vec();
        dup.push(("Wgg", 1));
        let err = BandwidthWeights::from_pairs(dup, 10_000).unwrap_err();
        assert_eq!(err, PathError::DuplicateWeight { key: "Wgg".into() });

        // Negative *ignored* keys are ignored too.
        let mut odd = W2022.to_vec();
        odd.push(("Wxx", -5));
        assert!(BandwidthWeights::from_pairs(odd, 10_000).is_ok());

        assert_eq!(BandwidthWeights::from_pairs(W2022.iter().copied(), 0).unwrap_err(), PathError::BadScale { scale: 0 });

        assert_eq!(PathSelector::new(&[], BandwidthWeights::uniform()).unwrap_err(), PathError::NoRelays);
        assert!(PathError::NoRelays.to_string().contains("relays"));

        let bad = BandwidthWeights { wmd: -3, ..BandwidthWeights::uniform() };
        let err = PathSelector::new(&five_relays(), bad).unwrap_err();
        assert!(matches!(&err, PathError::BadWeight { key, .. } if key == "Wmd"));
    }

    #[test]
    fn flags_from_names() {
        let f = RelayFlags::from_names(["Guard", "Fast", "Stable", "Running", "Valid", "NoEdConsensus"]);
        assert!(f.contains(G | F | RelayFlags::STABLE | RelayFlags::RUNNING | RelayFlags::VALID));
        assert!(!f.contains(E));
        let all = RelayFlags::from_names(FLAG_NAMES.iter().map(|(n, _)| *n));
        assert_eq!(all.0, (1 << 10) - 1);
        assert_eq!(RelayFlags::from_names(["guard", "EXIT"]), RelayFlags::EMPTY, "names are case-sensitive");
        assert!(RelayFlags::default().contains(RelayFlags::EMPTY));
        assert_eq!(format!("{:?}", G | B), "RelayFlags(Guard|BadExit)");
    }

    /// Upper-tail chi-square critical value for `df` degrees of freedom and upper-tail
    /// normal quantile `z`, by the Wilson–Hilferty cube approximation.
    fn chi2_critical(df: usize, z: f64) -> f64 {
        let k = df as f64;
        let a = 2.0 / (9.0 * k);
        k * (1.0 - a + z * a.sqrt()).powi(3)
    }

    /// z for upper-tail p = 0.001.
    const Z_0_001: f64 = 3.090_232;

    fn stats_relays() -> Vec<RelayInfo> {
        vec![
            relay("g1", 5000, G | F),
            relay("g2", 12000, G | F | RelayFlags::STABLE),
            relay("g3", 700, G | F),
            relay("ge1", 9000, G | E | F),
            relay("ge2", 3000, G | E | F),
            relay("e1", 8000, E | F),
            relay("e2", 1500, E | F),
            relay("e3", 20000, E | F),
            relay("m1", 4000, F),
            relay("m2", 250, F),
            relay("m3", 15000, F),
            relay("bad", 6000, E | B | F),
            relay("gbad", 2500, G | E | B | F),
            relay("slow", 30000, G | E),
            relay("zero", 0, G | E | F),
        ]
    }

    /// Returns (statistic, df, critical) after asserting zero-weight relays never appear.
    fn chi_square(sel: &PathSelector, pos: Position, draws: usize, seed: u64, exclude: &[usize]) -> (f64, usize, f64) {
        let mut rng = StdRng::seed_from_u64(seed);
        let mut counts = vec![0u64; sel.len()];
        for _ in 0..draws {
            let i = sel.choose(pos, &mut rng, exclude).expect("some relay is eligible");
            counts[i] += 1;
        }
        let total: f64 = (0..sel.len()).filter(|i| !exclude.contains(i)).map(|i| sel.weight(i, pos)).sum();
        let mut stat = 0.0;
        let mut cells = 0;
        for (i, &c) in counts.iter().enumerate() {
            let w = if exclude.contains(&i) { 0.0 } else { sel.weight(i, pos) };
            if w == 0.0 {
                assert_eq!(c, 0, "{pos:?}: relay {i} has zero weight but was chosen {c} times");
                continue;
            }
            let expected = draws as f64 * w / total;
            stat += (c as f64 - expected).powi(2) / expected;
            cells += 1;
        }
        let df = cells - 1;
        (stat, df, chi2_critical(df, Z_0_001))
    }

    #[test]
    fn chi_square_frequencies_match_weights() {
        let sel = PathSelector::new(&stats_relays(), w2022()).unwrap();
        for (k, pos) in Position::ALL.into_iter().enumerate() {
            let (stat, df, crit) = chi_square(&sel, pos, 200_000, 42 + k as u64, &[]);
            eprintln!("chi2 {pos:?}: statistic {stat:.3}, df {df}, critical(p=0.001) {crit:.3}");
            assert!(stat < crit, "{pos:?}: chi2 {stat} >= {crit} (df {df})");
        }
        let sel = PathSelector::new(&stats_relays(), hand_weights()).unwrap();
        for (k, pos) in Position::ALL.into_iter().enumerate() {
            let (stat, df, crit) = chi_square(&sel, pos, 200_000, 7 + k as u64, &[]);
            eprintln!("chi2 hand-weights {pos:?}: statistic {stat:.3}, df {df}, critical(p=0.001) {crit:.3}");
            assert!(stat < crit, "{pos:?}: chi2 {stat} >= {crit} (df {df})");
        }
    }

    #[test]
    fn chi_square_with_exclusions() {
        // Exclude the heaviest middle relay (m3, 15000 of ~45000 weight) so that rejection
        // sampling happens often; the conditional distribution must still be exact.
        let sel = PathSelector::new(&stats_relays(), w2022()).unwrap();
        let (stat, df, crit) = chi_square(&sel, Position::Middle, 200_000, 99, &[10, 1]);
        eprintln!("chi2 Middle excluding m3,g2: statistic {stat:.3}, df {df}, critical(p=0.001) {crit:.3}");
        assert!(stat < crit);
        // Exclude two huge exits so almost every draw falls back to the linear scan.
        let relays = vec![
            relay("huge1", 1_000_000, E | F),
            relay("small1", 10, E | F),
            relay("huge2", 1_000_000, E | F),
            relay("small2", 20, E | F),
            relay("small3", 45, E | F),
        ];
        let sel = PathSelector::new(&relays, w2022()).unwrap();
        let (stat, df, crit) = chi_square(&sel, Position::Exit, 50_000, 5, &[0, 2]);
        eprintln!("chi2 Exit fallback: statistic {stat:.3}, df {df}, critical(p=0.001) {crit:.3}");
        assert!(stat < crit);
    }

    #[test]
    fn wilson_hilferty_sanity() {
        // Tabulated chi-square 0.999 quantiles.
        for (df, table) in [(1usize, 10.828), (2, 13.816), (5, 20.515), (10, 29.588), (30, 59.703)] {
            let approx = chi2_critical(df, Z_0_001);
            assert!((approx - table).abs() / table < 0.05, "df {df}: {approx} vs {table}");
        }
    }

    #[test]
    fn exclusion_is_honoured() {
        let sel = PathSelector::new(&five_relays(), hand_weights()).unwrap();
        let mut rng = StdRng::seed_from_u64(3);
        for _ in 0..2000 {
            let g = sel.choose(Position::Guard, &mut rng, &[4]).unwrap();
            assert!(g == 0 || g == 1, "{g}");
        }
        // Exits: 1 and 2 only; exclude both → None (also a rejection-heavy case).
        assert_eq!(sel.choose(Position::Exit, &mut rng, &[1, 2]), None);
        assert_eq!(sel.choose(Position::Exit, &mut rng, &[2, 1, 77]), None);
        for _ in 0..200 {
            assert_eq!(sel.choose(Position::Exit, &mut rng, &[2]), Some(1));
        }
        let all: Vec<usize> = (0..5).collect();
        for p in Position::ALL {
            assert_eq!(sel.choose(p, &mut rng, &all), None);
        }
        // Zero-weight positions give None even with nothing excluded.
        let only_middles = vec![relay("a", 10, F), relay("b", 20, F)];
        let sel = PathSelector::new(&only_middles, BandwidthWeights::uniform()).unwrap();
        assert_eq!(sel.choose(Position::Guard, &mut rng, &[]), None);
        assert_eq!(sel.choose(Position::Exit, &mut rng, &[]), None);
        assert_eq!(sel.choose_path(&mut rng, None), Err(Position::Exit));
    }

    /// `stats_relays` with addresses: g1, e1 and m1 share 10.1/16, g2 and e3 share 10.2/16;
    /// the rest have a /16 each, or (m2, m3) no known address.
    fn relays_with_subnets() -> Vec<RelayInfo> {
        let subnets = [
            Some(0x0a01),
            Some(0x0a02),
            Some(3),
            Some(4),
            Some(5),
            Some(0x0a01),
            Some(7),
            Some(0x0a02),
            Some(0x0a01),
            None,
            None,
            Some(12),
            Some(13),
        ];
        stats_relays().into_iter().zip(subnets).map(|(r, subnet)| RelayInfo { subnet, ..r }).collect()
    }

    #[test]
    fn a_guard_for_the_exit_is_a_primary_that_obeys_it() {
        // g1 (0) shares 10.1/16 with e1 (5); g2 (1) 10.2/16; g3 (2) its own; ge1 (3).
        let sel = PathSelector::new(&relays_with_subnets(), w2022()).unwrap();
        let mut rng = StdRng::seed_from_u64(21);
        let mut seen = [0usize; 4];
        for _ in 0..400 {
            // One in use: the first primary that obeys the exit, no choice.
            assert_eq!(sel.guard_for_exit(&mut rng, &[0, 1, 2], 3, 1, 5), Some(1));
            // Two in use: the first two that obey it, uniformly.
            seen[sel.guard_for_exit(&mut rng, &[0, 1, 2], 3, 2, 5).unwrap()] += 1;
            let g = sel.guard_for_exit(&mut rng, &[0, 1, 2], 3, 2, 6).unwrap();
            assert!(g == 0 || g == 1, "{g}");
            // The exit itself is never its guard.
            assert_eq!(sel.guard_for_exit(&mut rng, &[3, 0], 2, 1, 3), Some(0));
        }
        assert!(seen[0] == 0 && seen[3] == 0 && seen[1] > 150 && seen[2] > 150, "{seen:?}");
        // Every primary conflicts: the first further guard, in sampled order, that does not.
        assert_eq!(sel.guard_for_exit(&mut rng, &[0, 5, 2, 1], 1, 1, 5), Some(2));
        // None fits: the caller samples another.
        assert_eq!(sel.guard_for_exit(&mut rng, &[0], 3, 1, 5), None);
        assert!(sel.conflicts(0, 5) && sel.conflicts(3, 3) && !sel.conflicts(0, 1) && !sel.conflicts(9, 10));
    }

    #[test]
    fn choose_apart_separates_identity_from_subnet_exclusion() {
        let sel = PathSelector::new(&relays_with_subnets(), w2022()).unwrap();
        let (mut a, mut b) = (StdRng::seed_from_u64(4), StdRng::seed_from_u64(4));
        for _ in 0..500 {
            assert_eq!(sel.choose(Position::Exit, &mut a, &[0, 7]), sel.choose_apart(Position::Exit, &mut b, &[0, 7], &[0, 7]));
        }
        // Without the /16 rule, e1 (10.1/16, as g1) is drawn beside g1.
        let e1 = (0..500).filter(|_| sel.choose_apart(Position::Exit, &mut a, &[0], &[]) == Some(5)).count();
        assert!(e1 > 20, "{e1}");
    }

    #[test]
    fn subnet_of_takes_the_first_two_octets() {
        assert_eq!(RelayInfo::subnet_of("10.1.200.3".parse().unwrap()), 0x0a01);
        assert_eq!(RelayInfo::subnet_of("192.0.2.7".parse().unwrap()), RelayInfo::subnet_of("192.0.99.1".parse().unwrap()));
        assert_ne!(RelayInfo::subnet_of("192.0.2.7".parse().unwrap()), RelayInfo::subnet_of("192.1.2.7".parse().unwrap()));
    }

    #[test]
    fn no_two_relays_of_a_path_share_a_known_subnet() {
        let relays = relays_with_subnets();
        let sel = PathSelector::new(&relays, w2022()).unwrap();
        let mut rng = StdRng::seed_from_u64(5);
        let mut unknown_with_g1 = 0;
        for round in 0..5000 {
            let guard = if round % 2 == 0 { None } else { Some([0, 1, 2][round % 3]) };
            let path = sel.choose_path(&mut rng, guard).expect("path exists");
            for (i, &a) in path.iter().enumerate() {
                for &b in &path[i + 1..] {
                    let (sa, sb) = (relays[a].subnet, relays[b].subnet);
                    assert!(sa.is_none() || sa != sb, "{path:?} has two relays in /16 {sa:?}");
                }
            }
            unknown_with_g1 += (path[0] == 0 && relays[path[1]].subnet.is_none()) as u32;
        }
        // A relay without an address (m2, m3) is never excluded for its network.
        assert!(unknown_with_g1 > 100, "{unknown_with_g1}");
        // A new entry guard is not in the /16 of the existing ones (routerlist_add_family).
        for _ in 0..2000 {
            let g = sel.choose(Position::Guard, &mut rng, &[0]).unwrap();
            assert!(g != 0 && relays[g].subnet != Some(0x0a01), "{g}");
        }
    }

    #[test]
    fn a_shared_subnet_removes_its_relays_and_keeps_the_others_proportions() {
        // Exits given guard g1 (10.1/16): e1 (also 10.1/16) is out; the others keep their
        // relative weights (rejection sampling keeps the conditional distribution exact).
        let relays = relays_with_subnets();
        let sel = PathSelector::new(&relays, w2022()).unwrap();
        let mut rng = StdRng::seed_from_u64(9);
        let n = 60_000;
        let mut count = vec![0u32; relays.len()];
        for _ in 0..n {
            count[sel.choose(Position::Exit, &mut rng, &[0]).unwrap()] += 1;
        }
        assert_eq!(count[5], 0, "e1 shares g1's /16");
        let total: f64 = (0..relays.len()).filter(|&i| i != 0 && i != 5).map(|i| sel.weight(i, Position::Exit)).sum();
        for i in (0..relays.len()).filter(|&i| i != 0 && i != 5) {
            let want = sel.weight(i, Position::Exit) / total;
            let got = count[i] as f64 / n as f64;
            assert!((got - want).abs() < 0.01, "relay {i}: {got:.4} against {want:.4}");
        }
    }

    #[test]
    fn distinct_subnets_draw_exactly_as_no_addresses() {
        let plain = stats_relays();
        let distinct: Vec<RelayInfo> = plain.iter().enumerate().map(|(i, r)| RelayInfo { subnet: Some(i as u16), ..r.clone() }).collect();
        let (a, b) = (PathSelector::new(&plain, w2022()).unwrap(), PathSelector::new(&distinct, w2022()).unwrap());
        let (mut ra, mut rb) = (StdRng::seed_from_u64(3), StdRng::seed_from_u64(3));
        for round in 0..2000 {
            let guard = (round % 2 == 1).then_some(1);
            assert_eq!(a.choose_path(&mut ra, guard), b.choose_path(&mut rb, guard));
        }
    }

    #[test]
    fn choose_path_distinct_with_correct_flags() {
        let relays = stats_relays();
        let sel = PathSelector::new(&relays, w2022()).unwrap();
        let mut rng = StdRng::seed_from_u64(11);
        for round in 0..5000 {
            let guard = if round % 2 == 0 { None } else { Some([0, 1, 2, 12][round % 4]) };
            let [g, m, e] = sel.choose_path(&mut rng, guard).expect("path exists");
            assert!(g != m && m != e && g != e, "{g} {m} {e}");
            if let Some(want) = guard {
                assert_eq!(g, want);
            }
            for (i, p) in [(g, Position::Guard), (m, Position::Middle), (e, Position::Exit)] {
                assert!(relays[i].flags.contains(F), "{p:?} relay {i} lacks Fast");
                if guard.is_none() || p != Position::Guard {
                    assert!(sel.weight(i, p) > 0.0, "{p:?} relay {i} has zero weight");
                }
            }
            assert!(relays[g].flags.contains(G));
            assert!(relays[e].flags.contains(E) && !relays[e].flags.contains(B));
        }
        // A guard that cannot be a guard, or an out-of-range one, fails the guard position.
        assert_eq!(sel.choose_path(&mut rng, Some(8)), Err(Position::Guard));
        assert_eq!(sel.choose_path(&mut rng, Some(13)), Err(Position::Guard));
        assert_eq!(sel.choose_path(&mut rng, Some(1000)), Err(Position::Guard));
    }

    /// An RNG whose every word is `0` (or all ones): `random_range(0..n)` then draws 0 (or
    /// `n - 1`), the ends of the cumulative weight table.
    struct ConstRng(u64);

    impl rand::RngCore for ConstRng {
        fn next_u32(&mut self) -> u32 {
            self.0 as u32
        }
        fn next_u64(&mut self) -> u64 {
            self.0
        }
        fn fill_bytes(&mut self, dst: &mut [u8]) {
            dst.fill(self.0 as u8);
        }
    }

    #[test]
    fn draws_at_the_ends_of_the_weights_hit_the_relays_there() {
        // Weight scale 1, all weights 1: exit weights are the bandwidths of e1 (3), e2 (1)
        // and e3 (5), and 0 for the middles around them.
        let pairs: Vec<(&str, i64)> = REQUIRED_KEYS.iter().map(|k| (*k, 1)).collect();
        let ones = BandwidthWeights::from_pairs(pairs, 1).unwrap();
        let relays = vec![relay("m1", 5, F), relay("e1", 3, E | F), relay("e2", 1, E | F), relay("m2", 7, F), relay("e3", 5, E | F)];
        let sel = PathSelector::new(&relays, ones).unwrap();
        let (mut first, mut last) = (ConstRng(0), ConstRng(u64::MAX));
        // x = 0 is e1's first unit of weight (not m1, of weight 0); x = 8 is e3's last.
        assert_eq!(sel.choose(Position::Exit, &mut first, &[]), Some(1));
        assert_eq!(sel.choose(Position::Exit, &mut last, &[]), Some(4));
        // With e3 excluded, x = 8 hits it every time; the linear scan over e1 and e2 that
        // follows draws x = 3, which is past e1's 0..3: e2.
        assert_eq!(sel.choose(Position::Exit, &mut last, &[4]), Some(2));
        assert_eq!(sel.choose(Position::Exit, &mut first, &[4]), Some(1));
    }

    #[test]
    fn a_path_through_a_bridge_uses_it_once() {
        // The bridge could serve every position and outweighs the rest a hundredfold; the
        // exit and middle are drawn from the others.
        let relays = vec![relay("bridge", 1000, G | E | F), relay("exit", 10, E | F), relay("middle", 10, F), relay("both", 10, G | E | F)];
        let sel = PathSelector::new(&relays, BandwidthWeights::uniform()).unwrap();
        let mut rng = StdRng::seed_from_u64(4);
        for _ in 0..200 {
            let [b, m, e] = sel.choose_path_via(&mut rng, 0).unwrap();
            assert!(b == 0 && m != 0 && e != 0 && m != e, "{b} {m} {e}");
            assert!(relays[e].flags.contains(E));
        }
    }

    #[test]
    fn choose_path_three_relay_network() {
        // The minimal network the simulator's tests build, with uniform weights.
        let relays = vec![relay("guard", 100, G | F), relay("middle", 100, F), relay("exit", 100, E | F)];
        let sel = PathSelector::new(&relays, BandwidthWeights::uniform()).unwrap();
        let mut rng = StdRng::seed_from_u64(0);
        for _ in 0..100 {
            assert_eq!(sel.choose_path(&mut rng, None), Ok([0, 1, 2]));
            assert_eq!(sel.choose_path(&mut rng, Some(0)), Ok([0, 1, 2]));
        }
    }

    #[test]
    fn deterministic_for_a_seed() {
        let sel = PathSelector::new(&stats_relays(), w2022()).unwrap();
        let run = |seed| {
            let mut rng = StdRng::seed_from_u64(seed);
            (0..200).map(|_| sel.choose_path(&mut rng, None)).collect::<Vec<_>>()
        };
        assert_eq!(run(5), run(5));
        assert_ne!(run(5), run(6));
    }

    fn arb_relays() -> impl Strategy<Value = Vec<RelayInfo>> {
        prop::collection::vec((0u64..1000, 0u16..(1 << 10)), 1..12)
            .prop_map(|v| v.into_iter().enumerate().map(|(i, (bw, f))| relay(&format!("r{i}"), bw, RelayFlags(f))).collect())
    }

    fn arb_weights() -> impl Strategy<Value = BandwidthWeights> {
        prop::collection::vec(0i64..=10_000, 11).prop_map(|v| {
            let pairs: Vec<(&str, i64)> = REQUIRED_KEYS.iter().copied().zip(v).collect();
            BandwidthWeights::from_pairs(pairs, 10_000).unwrap()
        })
    }

    proptest! {
        #[test]
        fn choose_respects_eligibility_and_exclusion(
            relays in arb_relays(),
            weights in arb_weights(),
            exclude in prop::collection::vec(0usize..14, 0..6),
            seed in any::<u64>(),
        ) {
            let sel = PathSelector::new(&relays, weights).unwrap();
            let mut rng = StdRng::seed_from_u64(seed);
            for pos in Position::ALL {
                let available: f64 = (0..relays.len()).filter(|i| !exclude.contains(i)).map(|i| sel.weight(i, pos)).sum();
                for _ in 0..8 {
                    match sel.choose(pos, &mut rng, &exclude) {
                        Some(i) => {
                            prop_assert!(i < relays.len());
                            prop_assert!(!exclude.contains(&i));
                            prop_assert!(sel.weight(i, pos) > 0.0);
                            prop_assert!(sel.is_eligible(i, pos));
                        }
                        None => prop_assert_eq!(available, 0.0),
                    }
                }
            }
            if let Ok([g, m, e]) = sel.choose_path(&mut rng, None) {
                prop_assert!(g != m && m != e && g != e);
                prop_assert!(sel.weight(g, Position::Guard) > 0.0);
                prop_assert!(sel.weight(m, Position::Middle) > 0.0);
                prop_assert!(sel.weight(e, Position::Exit) > 0.0);
            }
        }
    }
}
