//! BRAIDS: tickets from a bank buy relays' priority service (Jansen, Hopper and Kim,
//! "Recruiting New Tor Relays with BRAIDS", CCS 2010; spec `ewma-braids.md` part B).
//!
//! **Owns:** the ticket economy as relays see it: clients' wallets, free tickets, spending
//! tickets at each relay of a circuit, the low-latency limit, the exchange pipeline at the
//! bank with its tax, and which class each relayed cell is served in.
//! **Must not touch:** the relays' scheduling. Cells are labelled here
//! ([`IncentiveScheme::classify`]); the relay's HPD scheduler (`onionlab_tor::hpd`, paper
//! section 3.4) decides what the labels are worth.
//!
//! # The model (paper section; spec section)
//!
//! The paper's text here starts inside section 3.3 (ticket distribution, agents, the tax);
//! sections 3.1-3.2 (the bank, tickets, intervals) are cited through the spec.
//! - **Classes** (3.4; B.6.3): a client asks for low-latency (web browsing) or
//!   high-throughput (bulk) service, or pays nothing (normal, and every legacy client).
//! - **Tickets** (B.2.1; the worth: 4.1): one ticket pays one relay for `ticket_cells` cells
//!   (default 256, "a single ticket be worth 128 KB"). A circuit's relay serves the client's cells
//!   in the paid class while the circuit's credit there lasts; when it runs out and the
//!   client still holds a ticket valid now, the client pays another (a 3-hop circuit pays
//!   each of its relays separately). Credit covers the cells a relay queues on the circuit
//!   in either direction. With no ticket left, cells are normal.
//! - **Free tickets** (4.1, distribution in 3.3; B.3): every paying client is handed
//!   `free_tickets` tickets every `free_period` (default 3 every 10 minutes, "so they may
//!   utilize a prioritized circuit at any time"), the first when it joins (its group's
//!   `start`), none for the time before. By default they are spendable in the spending
//!   interval they are handed out in; with `free_tickets_need_exchange` they must first be
//!   exchanged like earned tickets (B.2.3: the paper allows either reading). Agents,
//!   their quotas and the unique-IP rule are not modelled: every client of the run has its
//!   own address and gets its handout (they matter for agent collusion, B.4, not here).
//! - **Intervals and exchange** (3.1 as 4.1 cites it, 24 hours: 4.1; B.2.2-B.2.3): time is cut into spending
//!   intervals of `spending_interval` (the paper suggests 24 hours; runs compress it). A
//!   ticket is spendable in one interval. Tickets a relay receives in interval i are
//!   exchanged at the bank in i+1 and spendable in i+2; a client's tickets unspent at the
//!   end of i are exchanged the same way. Each exchange is taxed (end of 3.3; B.5): a fraction `tax` of
//!   the tickets presented is destroyed (default 0: the paper gives no rate). The tax is
//!   applied per holder with a carried remainder, so a holder loses exactly
//!   `floor(presented * tax + carry)` tickets, deterministic and exact on average (the
//!   paper's hash-range taxation is random per ticket with the same mean).
//! - **Earning** (abstract, 3.1; B.1): a relay whose operator is a client of the run
//!   (`operators`) exchanges its received tickets into its operator's wallet: that is how
//!   relay operators come to get better service, the incentive BRAIDS is built for.
//!   Tickets of relays without an operator are exchanged and counted, and spent by nobody.
//! - **Low-latency limit** (3.4; B.6.3): a circuit's low-latency cells at one relay beyond
//!   `low_latency_limit` within a window of `low_latency_window` are demoted to normal
//!   (and still use up the paid credit, spec B.6.3's design choice). The paper suggests a
//!   threshold "equal to the number of free tickets each user receives during a spending
//!   interval": the default is that many tickets' worth of cells, per spending interval.
//! - **Bank cost** (4.1; B.7): each ticket the bank exchanges costs 488 bytes (and a
//!   signature); taxed tickets cost nothing, as under the hash-range tax (end of 3.3) their
//!   holders know them and do not present them. The counters give the totals.
//! - **An operator at its own relay** (not in the paper): a relay serves its operator's
//!   circuits in the operator's class without a ticket (with `entry = "bridge"` every
//!   operator circuit starts there); paying itself would only hold the ticket back two
//!   intervals and count it as earned.

use std::collections::BTreeMap;

use onionlab_core::{SimDuration, SimTime};
use onionlab_tor::{ClassSplit, IncentiveScheme, NodeId, ServiceClass};

/// Bytes one ticket exchange costs the bank (paper 4.1, "each ticket exchange consumes 488
/// bytes of bandwidth"); taxed tickets are not presented.
pub const EXCHANGE_BYTES: u64 = 488;

/// Why a BRAIDS configuration is not valid; each names the parameter.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum BraidsError {
    #[error("ticket_cells: a ticket must be worth at least one cell")]
    TicketCells,
    #[error("free_period: must be positive when free_tickets > 0")]
    FreePeriod,
    #[error("spending_interval: must be positive")]
    SpendingInterval,
    #[error("tax: must lie in [0, 1], got {0}")]
    Tax(f64),
    #[error("low_latency_window: must be positive")]
    LowLatencyWindow,
}

/// BRAIDS's parameters; see the module docs for each one's source.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BraidsParams {
    /// Cells one ticket pays for at one relay. Default 256 (128 KiB of 512-byte cells).
    pub ticket_cells: u32,
    /// Free tickets per handout. Default 3.
    pub free_tickets: u32,
    /// Time between handouts. Default 10 minutes.
    pub free_period: SimDuration,
    /// Length of a spending interval. Default 24 hours (the paper's suggestion).
    pub spending_interval: SimDuration,
    /// Fraction of the tickets presented at each exchange that the bank destroys. Default 0.
    pub tax: f64,
    /// Low-latency cells a circuit may send through one relay per window before the rest
    /// is demoted. Default: the free tickets of one spending interval, in cells.
    pub low_latency_limit: u64,
    /// The low-latency limit's window. Default: the spending interval.
    pub low_latency_window: SimDuration,
    /// Free tickets must be exchanged before they are spent (spendable two intervals
    /// after the handout). Default false.
    pub free_tickets_need_exchange: bool,
}

impl Default for BraidsParams {
    fn default() -> Self {
        BraidsParams::with_interval(SimDuration::from_secs(24 * 3600))
    }
}

impl BraidsParams {
    /// The defaults with a spending interval of `interval`, and the low-latency limit and
    /// window that follow from it.
    pub fn with_interval(interval: SimDuration) -> Self {
        let mut p = BraidsParams {
            ticket_cells: 256,
            free_tickets: 3,
            free_period: SimDuration::from_secs(600),
            spending_interval: interval,
            tax: 0.0,
            low_latency_limit: 0,
            low_latency_window: interval,
            free_tickets_need_exchange: false,
        };
        p.low_latency_limit = p.default_low_latency_limit();
        p
    }

    /// Free tickets a client gets per spending interval (the paper's eta), in cells.
    pub fn default_low_latency_limit(&self) -> u64 {
        if self.free_period.as_nanos() == 0 {
            return 0;
        }
        let handouts = self.spending_interval.as_nanos().div_ceil(self.free_period.as_nanos());
        handouts * self.free_tickets as u64 * self.ticket_cells as u64
    }

    pub fn validate(&self) -> Result<(), BraidsError> {
        if self.ticket_cells == 0 {
            return Err(BraidsError::TicketCells);
        }
        if self.free_tickets > 0 && self.free_period.as_nanos() == 0 {
            return Err(BraidsError::FreePeriod);
        }
        if self.spending_interval.as_nanos() == 0 {
            return Err(BraidsError::SpendingInterval);
        }
        if !(0.0..=1.0).contains(&self.tax) {
            return Err(BraidsError::Tax(self.tax));
        }
        if self.low_latency_window.as_nanos() == 0 {
            return Err(BraidsError::LowLatencyWindow);
        }
        Ok(())
    }
}

/// Ticket totals of a run so far.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TicketCounters {
    /// Free tickets handed out.
    pub issued_free: u64,
    /// Tickets clients paid relays with.
    pub spent: u64,
    /// Tickets presented at the bank (relays' received and clients' unspent).
    pub exchanged: u64,
    /// Of those, destroyed by the tax.
    pub taxed: u64,
    /// Exchanged tickets that went to relay operators' wallets.
    pub earned_by_operators: u64,
    /// Exchanged tickets of relays without an operator in the run (spent by nobody).
    pub earned_unused: u64,
    /// Cells served in the low-latency and high-throughput classes, and cells a circuit
    /// asked a class for and did not get (no credit left, or over the low-latency limit).
    pub cells_low_latency: u64,
    pub cells_high_throughput: u64,
    pub cells_unpaid: u64,
    pub cells_demoted: u64,
    /// Cells of circuits whose client pays nothing (normal by choice, legacy).
    pub cells_not_paying: u64,
    /// Cells an operator's own relay took on its circuits in the operator's class without
    /// a ticket (also counted in the class's cells, or as demoted).
    pub cells_own_relay: u64,
}

/// A client's tickets by the spending interval they are valid in.
#[derive(Clone, Debug, Default)]
struct Wallet {
    class: Option<ServiceClass>,
    tickets: BTreeMap<u64, u64>,
    /// Intervals before this one are closed: their unspent tickets were exchanged.
    open_from: u64,
    /// Handouts received so far.
    handouts: u64,
    /// When the client joins the run (its group's `start`): its first handout.
    joined: SimTime,
    tax_carry: f64,
    /// The relay this client operates, if any.
    relay: Option<NodeId>,
}

/// Tickets a relay received, by interval, and what is left of its tax remainder.
#[derive(Clone, Debug, Default)]
struct RelayAccount {
    received: BTreeMap<u64, u64>,
    operator: Option<NodeId>,
    tax_carry: f64,
}

/// What BRAIDS keeps about one circuit.
#[derive(Clone, Debug, Default)]
struct CircuitAccount {
    client: NodeId,
    relays: [NodeId; 3],
    class: Option<ServiceClass>,
    /// Paid cells left at each relay.
    credit: [u64; 3],
    /// Low-latency cells at each relay in the current window, and the window's start.
    ll_used: [u64; 3],
    ll_window: [u64; 3],
}

/// The BRAIDS incentive scheme of one run.
#[derive(Clone, Debug)]
pub struct Braids {
    params: BraidsParams,
    wallets: BTreeMap<NodeId, Wallet>,
    relays: BTreeMap<NodeId, RelayAccount>,
    circuits: Vec<CircuitAccount>,
    counters: TicketCounters,
}

impl Braids {
    /// `clients`: each paying client and the class it asks for (clients not named pay
    /// nothing); `operators`: (client, the relay it operates).
    pub fn new(params: BraidsParams, clients: &[(NodeId, ServiceClass)], operators: &[(NodeId, NodeId)]) -> Result<Self, BraidsError> {
        params.validate()?;
        let mut wallets: BTreeMap<NodeId, Wallet> = BTreeMap::new();
        for &(c, class) in clients {
            wallets.entry(c).or_default().class = (class != ServiceClass::Normal).then_some(class);
        }
        let mut relays: BTreeMap<NodeId, RelayAccount> = BTreeMap::new();
        for &(client, relay) in operators {
            wallets.entry(client).or_default().relay = Some(relay);
            relays.entry(relay).or_default().operator = Some(client);
        }
        Ok(Braids { params, wallets, relays, circuits: Vec::new(), counters: TicketCounters::default() })
    }

    pub fn params(&self) -> &BraidsParams {
        &self.params
    }

    /// `client` joins the network at `at` (its group's `start`; default time 0): it gets
    /// its first handout then and one every `free_period` after, none for the time before.
    pub fn set_joined(&mut self, client: NodeId, at: SimTime) {
        if let Some(w) = self.wallets.get_mut(&client) {
            w.joined = at;
        }
    }

    pub fn ticket_counters(&self) -> TicketCounters {
        self.counters
    }

    fn interval(&self, now: SimTime) -> u64 {
        now.as_nanos() / self.params.spending_interval.as_nanos()
    }

    /// Tickets `client` can spend at `now` (its wallet brought up to date).
    pub fn balance(&mut self, client: NodeId, now: SimTime) -> u64 {
        self.settle(client, now);
        let i = self.interval(now);
        self.wallets.get(&client).and_then(|w| w.tickets.get(&i)).copied().unwrap_or(0)
    }

    /// `n` tickets presented by a holder with remainder `carry`: how many survive the tax.
    fn exchange(counters: &mut TicketCounters, tax: f64, carry: &mut f64, n: u64) -> u64 {
        if n == 0 {
            return 0;
        }
        let due = n as f64 * tax + *carry;
        let taxed = (due.floor() as u64).min(n);
        *carry = due - taxed as f64;
        counters.exchanged += n;
        counters.taxed += taxed;
        n - taxed
    }

    /// Brings `client`'s wallet up to `now`: the handouts due, and the exchanges of every
    /// interval that has ended (its own unspent tickets, and what its relay received).
    fn settle(&mut self, client: NodeId, now: SimTime) {
        let p = self.params;
        let current = self.interval(now);
        let Some(w) = self.wallets.get_mut(&client) else { return };
        if w.class.is_none() && w.relay.is_none() {
            return;
        }
        // Handouts up to now, each into the interval it falls in (or two later, if free
        // tickets must be exchanged first).
        if w.class.is_some() && p.free_tickets > 0 && now >= w.joined {
            let due = now.saturating_since(w.joined).as_nanos() / p.free_period.as_nanos() + 1;
            while w.handouts < due {
                let at = w.joined.as_nanos() + w.handouts * p.free_period.as_nanos();
                let i = at / p.spending_interval.as_nanos();
                w.handouts += 1;
                self.counters.issued_free += p.free_tickets as u64;
                if p.free_tickets_need_exchange {
                    let kept = Self::exchange(&mut self.counters, p.tax, &mut w.tax_carry, p.free_tickets as u64);
                    *w.tickets.entry(i + 2).or_insert(0) += kept;
                } else {
                    *w.tickets.entry(i).or_insert(0) += p.free_tickets as u64;
                }
            }
        }
        // Intervals that have ended: exchanged in the next, spendable in the one after.
        while w.open_from < current {
            let s = w.open_from;
            let unspent = w.tickets.remove(&s).unwrap_or(0);
            let mut back = Self::exchange(&mut self.counters, p.tax, &mut w.tax_carry, unspent);
            if let Some(r) = w.relay.and_then(|r| self.relays.get_mut(&r)) {
                let received = r.received.remove(&s).unwrap_or(0);
                let kept = Self::exchange(&mut self.counters, p.tax, &mut r.tax_carry, received);
                self.counters.earned_by_operators += kept;
                back += kept;
            }
            if back > 0 {
                *w.tickets.entry(s + 2).or_insert(0) += back;
            }
            w.open_from += 1;
        }
    }

    /// Exchanges, up to `now`, the tickets of relays that no client of the run operates.
    fn settle_unoperated(&mut self, now: SimTime) {
        let current = self.interval(now);
        for r in self.relays.values_mut().filter(|r| r.operator.is_none()) {
            let ended: Vec<u64> = r.received.range(..current).map(|(&i, _)| i).collect();
            for i in ended {
                let n = r.received.remove(&i).unwrap_or(0);
                self.counters.earned_unused += Self::exchange(&mut self.counters, self.params.tax, &mut r.tax_carry, n);
            }
        }
    }

    /// `client` pays relay `relay` one ticket valid at `now`, if it has one.
    fn pay(&mut self, client: NodeId, relay: NodeId, now: SimTime) -> bool {
        self.settle(client, now);
        let i = self.interval(now);
        let Some(t) = self.wallets.get_mut(&client).and_then(|w| w.tickets.get_mut(&i)).filter(|t| **t > 0) else {
            return false;
        };
        *t -= 1;
        self.counters.spent += 1;
        *self.relays.entry(relay).or_default().received.entry(i).or_insert(0) += 1;
        true
    }
}

impl IncentiveScheme for Braids {
    fn on_circuit_created(&mut self, _now: SimTime, circ: u32, client: NodeId, path: &[NodeId]) {
        let i = circ as usize;
        if self.circuits.len() <= i {
            self.circuits.resize_with(i + 1, Default::default);
        }
        let mut relays = [0; 3];
        for (r, &n) in relays.iter_mut().zip(path) {
            *r = n;
        }
        let class = self.wallets.get(&client).and_then(|w| w.class);
        self.circuits[i] = CircuitAccount { client, relays, class, ..Default::default() };
    }

    fn classify(&mut self, now: SimTime, circ: u32, pos: usize, n: u32) -> ClassSplit {
        let normal = [(ServiceClass::Normal, n), (ServiceClass::Normal, 0)];
        let Some(class) = self.circuits.get(circ as usize).and_then(|a| a.class) else {
            self.counters.cells_not_paying += n as u64;
            return normal;
        };
        let acct = &self.circuits[circ as usize];
        let (client, relay, hop) = (acct.client, acct.relays[pos - 1], pos - 1);
        if self.wallets.get(&client).is_some_and(|w| w.relay == Some(relay)) {
            // The operator's own relay serves it in its class without a ticket: paying
            // itself would only hold the ticket back two intervals and count it as earned.
            self.circuits[circ as usize].credit[hop] += n as u64;
            self.counters.cells_own_relay += n as u64;
        }
        // Pay for what the credit does not cover, while the client has tickets.
        while self.circuits[circ as usize].credit[hop] < n as u64 && self.pay(client, relay, now) {
            self.circuits[circ as usize].credit[hop] += self.params.ticket_cells as u64;
        }
        let window = self.params.low_latency_window.as_nanos();
        let limit = self.params.low_latency_limit;
        let acct = &mut self.circuits[circ as usize];
        let paid = acct.credit[hop].min(n as u64);
        acct.credit[hop] -= paid;
        let mut served = paid;
        if class == ServiceClass::LowLatency {
            let w = now.as_nanos() / window;
            if acct.ll_window[hop] != w {
                acct.ll_window[hop] = w;
                acct.ll_used[hop] = 0;
            }
            served = paid.min(limit.saturating_sub(acct.ll_used[hop]));
            acct.ll_used[hop] += served;
            self.counters.cells_demoted += paid - served;
            self.counters.cells_low_latency += served;
        } else {
            self.counters.cells_high_throughput += served;
        }
        self.counters.cells_unpaid += n as u64 - paid;
        [(class, served as u32), (ServiceClass::Normal, n - served as u32)]
    }

    fn counters(&mut self, now: SimTime) -> Vec<(String, u64)> {
        let clients: Vec<NodeId> = self.wallets.keys().copied().collect();
        for c in clients {
            self.settle(c, now);
        }
        self.settle_unoperated(now);
        let c = self.counters;
        let held_by_clients: u64 = self.wallets.values().flat_map(|w| w.tickets.values()).sum();
        let held_by_relays: u64 = self.relays.values().flat_map(|r| r.received.values()).sum();
        [
            ("tickets_issued_free", c.issued_free),
            ("tickets_spent", c.spent),
            ("tickets_exchanged", c.exchanged),
            ("tickets_taxed", c.taxed),
            ("tickets_earned_by_operators", c.earned_by_operators),
            ("tickets_earned_unused", c.earned_unused),
            ("tickets_held_by_clients", held_by_clients),
            ("tickets_held_by_relays", held_by_relays),
            // Taxed tickets are not presented: under the hash-range tax their holders know them.
            ("bank_exchange_bytes", (c.exchanged - c.taxed) * EXCHANGE_BYTES),
            ("cells_low_latency", c.cells_low_latency),
            ("cells_high_throughput", c.cells_high_throughput),
            ("cells_unpaid", c.cells_unpaid),
            ("cells_demoted", c.cells_demoted),
            ("cells_not_paying", c.cells_not_paying),
            ("cells_own_relay", c.cells_own_relay),
        ]
        .into_iter()
        .map(|(k, v)| (format!("braids_{k}"), v))
        .collect()
    }

    fn name(&self) -> &'static str {
        "braids"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: u64) -> SimTime {
        SimTime::ZERO + SimDuration::from_secs(s)
    }

    /// 100 s intervals, 3 free tickets every 50 s, 256-cell tickets.
    fn params() -> BraidsParams {
        let mut p = BraidsParams::with_interval(SimDuration::from_secs(100));
        p.free_period = SimDuration::from_secs(50);
        p.low_latency_limit = p.default_low_latency_limit();
        p
    }

    const WEB: NodeId = 10;
    const BULK: NodeId = 11;
    const LEGACY: NodeId = 12;
    const OPERATOR: NodeId = 13;
    const GUARD: NodeId = 1;
    const MIDDLE: NodeId = 2;
    const EXIT: NodeId = 3;

    fn braids(p: BraidsParams) -> Braids {
        Braids::new(
            p,
            &[(WEB, ServiceClass::LowLatency), (BULK, ServiceClass::HighThroughput), (OPERATOR, ServiceClass::LowLatency)],
            &[(OPERATOR, GUARD)],
        )
        .unwrap()
    }

    #[test]
    fn defaults_are_the_papers() {
        let p = BraidsParams::default();
        assert_eq!(p.ticket_cells as u64 * 512, 128 * 1024, "a ticket is worth 128 KiB");
        assert_eq!((p.free_tickets, p.free_period), (3, SimDuration::from_secs(600)), "3 tickets every 10 minutes");
        assert_eq!(p.spending_interval, SimDuration::from_secs(86_400), "24-hour intervals");
        // eta = 3 x 6 x 24 = 432 tickets a day (spec B.3), the low-latency limit in cells.
        assert_eq!(p.low_latency_limit, 432 * 256);
        // The paper gives no tax rate (module docs: default 0), the low-latency window is
        // one spending interval (spec B.6.3's suggested default) and free tickets are
        // spendable when handed out (spec B.2.3's default reading).
        assert_eq!(p.tax, 0.0);
        assert_eq!(p.low_latency_window, p.spending_interval);
        assert!(!p.free_tickets_need_exchange);
        assert!(p.validate().is_ok());
    }

    #[test]
    fn eta_counts_every_handout_that_falls_in_an_interval() {
        // Spec B.3: eta = free tickets per user per spending interval. 100 s intervals and
        // a handout every 30 s: handouts at 0, 30, 60 and 90 s, 4 x 3 = 12 tickets.
        let mut p = BraidsParams::with_interval(SimDuration::from_secs(100));
        p.free_period = SimDuration::from_secs(30);
        assert_eq!(p.default_low_latency_limit(), 12 * 256);
        p.low_latency_limit = p.default_low_latency_limit();
        let mut b = braids(p);
        assert_eq!(b.balance(WEB, at(99)), 12, "the limit is what a client is handed in one interval");
    }

    #[test]
    fn a_circuit_pays_each_relay_a_ticket_per_256_cells() {
        let mut b = braids(params());
        b.on_circuit_created(at(0), 0, WEB, &[GUARD, MIDDLE, EXIT]);
        // 3 free tickets at t = 0. 100 cells at the guard: one ticket, 156 cells left there.
        assert_eq!(b.classify(at(1), 0, 1, 100), [(ServiceClass::LowLatency, 100), (ServiceClass::Normal, 0)]);
        assert_eq!(b.balance(WEB, at(1)), 2);
        // 300 at the middle: two tickets (512 cells), 212 left.
        assert_eq!(b.classify(at(1), 0, 2, 300), [(ServiceClass::LowLatency, 300), (ServiceClass::Normal, 0)]);
        assert_eq!(b.balance(WEB, at(1)), 0);
        // The exit: no ticket left, all normal.
        assert_eq!(b.classify(at(1), 0, 3, 10), [(ServiceClass::LowLatency, 0), (ServiceClass::Normal, 10)]);
        // The guard's credit (156) covers 156 of 200; the rest is normal.
        assert_eq!(b.classify(at(2), 0, 1, 200), [(ServiceClass::LowLatency, 156), (ServiceClass::Normal, 44)]);
        let c = b.ticket_counters();
        assert_eq!((c.spent, c.cells_low_latency, c.cells_unpaid), (3, 556, 54));
        // At t = 50 the next handout: the exit is paid again.
        assert_eq!(b.classify(at(50), 0, 3, 10), [(ServiceClass::LowLatency, 10), (ServiceClass::Normal, 0)]);
    }

    #[test]
    fn legacy_clients_and_unknown_circuits_are_normal() {
        let mut b = braids(params());
        b.on_circuit_created(at(0), 4, LEGACY, &[GUARD, MIDDLE, EXIT]);
        assert_eq!(b.classify(at(0), 4, 1, 7), [(ServiceClass::Normal, 7), (ServiceClass::Normal, 0)]);
        assert_eq!(b.classify(at(0), 99, 1, 7), [(ServiceClass::Normal, 7), (ServiceClass::Normal, 0)]);
        assert_eq!(b.ticket_counters().spent, 0);
    }

    #[test]
    fn a_client_that_asks_for_normal_service_gets_and_spends_no_tickets() {
        // Paper 3.3: Normal is for clients who "choose not to pay for service".
        let mut b = Braids::new(params(), &[(LEGACY, ServiceClass::Normal), (WEB, ServiceClass::LowLatency)], &[]).unwrap();
        b.on_circuit_created(at(0), 0, LEGACY, &[GUARD, MIDDLE, EXIT]);
        assert_eq!(b.classify(at(1), 0, 1, 7), [(ServiceClass::Normal, 7), (ServiceClass::Normal, 0)]);
        assert_eq!(b.balance(LEGACY, at(1)), 0);
        let c: BTreeMap<String, u64> = b.counters(at(1)).into_iter().collect();
        let got = (c["braids_tickets_spent"], c["braids_tickets_issued_free"], c["braids_cells_not_paying"]);
        assert_eq!(got, (0, 3, 7), "only WEB's handout at 0");
    }

    #[test]
    fn a_relays_tickets_are_exchanged_in_the_next_interval() {
        // Paper 4.1 / spec B.2.3: "tickets received in spending interval i are exchanged in
        // spending interval i + 1". MIDDLE has no operator: its exchanged tickets are counted
        // as earned by nobody.
        let mut b = Braids::new(params(), &[(BULK, ServiceClass::HighThroughput)], &[]).unwrap();
        b.on_circuit_created(at(0), 0, BULK, &[MIDDLE, GUARD, EXIT]);
        b.classify(at(10), 0, 1, 1);
        let c: BTreeMap<String, u64> = b.counters(at(99)).into_iter().collect();
        assert_eq!((c["braids_tickets_held_by_relays"], c["braids_tickets_earned_unused"]), (1, 0), "still interval 0");
        let c: BTreeMap<String, u64> = b.counters(at(100)).into_iter().collect();
        assert_eq!((c["braids_tickets_held_by_relays"], c["braids_tickets_earned_unused"]), (0, 1), "interval 1");
    }

    #[test]
    fn the_tax_takes_its_fraction_of_a_holders_tickets_across_exchanges() {
        // Spec B.5: a fraction tax of the tickets presented is destroyed (module docs: per
        // holder, exact on average). A relay nobody operates receives one ticket in each of
        // intervals 0..3 and presents it in the next: four exchanges of one ticket at tax
        // 1/2 destroy 2 of the 4, not floor(1/2) = 0 at each.
        let mut p = params();
        p.free_tickets = 1;
        p.free_period = p.spending_interval;
        p.tax = 0.5;
        let mut b = Braids::new(p, &[(BULK, ServiceClass::HighThroughput)], &[]).unwrap();
        for i in 0..4u32 {
            b.on_circuit_created(at(100 * i as u64), i, BULK, &[MIDDLE, GUARD, EXIT]);
            assert_eq!(b.classify(at(100 * i as u64 + 1), i, 1, 256)[0], (ServiceClass::HighThroughput, 256), "interval {i}");
        }
        let c: BTreeMap<String, u64> = b.counters(at(400)).into_iter().collect();
        let got = (c["braids_tickets_exchanged"], c["braids_tickets_taxed"], c["braids_tickets_earned_unused"]);
        assert_eq!(got, (4, 2, 2));
        // Taxed tickets are not presented (hash-range tax): the bank handles 2 at 488 B.
        assert_eq!(c["braids_bank_exchange_bytes"], 2 * 488);
    }

    #[test]
    fn a_reused_circuit_id_starts_with_no_credit() {
        let mut b = braids(params());
        b.on_circuit_created(at(0), 0, BULK, &[GUARD, MIDDLE, EXIT]);
        assert_eq!(b.classify(at(0), 0, 1, 1), [(ServiceClass::HighThroughput, 1), (ServiceClass::Normal, 0)]);
        b.on_circuit_created(at(0), 0, LEGACY, &[GUARD, MIDDLE, EXIT]);
        assert_eq!(b.classify(at(0), 0, 1, 1), [(ServiceClass::Normal, 1), (ServiceClass::Normal, 0)]);
    }

    #[test]
    fn low_latency_cells_over_the_limit_are_demoted_and_still_paid() {
        let mut p = params();
        p.low_latency_limit = 300;
        p.low_latency_window = SimDuration::from_secs(10);
        let mut b = braids(p);
        b.on_circuit_created(at(0), 0, WEB, &[GUARD, MIDDLE, EXIT]);
        // 400 cells: two tickets (512); 300 low-latency, 100 demoted; 112 credit left.
        assert_eq!(b.classify(at(0), 0, 1, 400), [(ServiceClass::LowLatency, 300), (ServiceClass::Normal, 100)]);
        assert_eq!(b.classify(at(5), 0, 1, 50), [(ServiceClass::LowLatency, 0), (ServiceClass::Normal, 50)]);
        // A new window: the 62 cells of credit left are served again.
        assert_eq!(b.classify(at(10), 0, 1, 62), [(ServiceClass::LowLatency, 62), (ServiceClass::Normal, 0)]);
        assert_eq!(b.ticket_counters().cells_demoted, 150);
        // Demoted cells were paid for: none of them counts as unpaid.
        assert_eq!(b.ticket_counters().cells_unpaid, 0);
        // High-throughput circuits have no limit.
        b.on_circuit_created(at(10), 1, BULK, &[GUARD, MIDDLE, EXIT]);
        assert_eq!(b.classify(at(10), 1, 1, 700), [(ServiceClass::HighThroughput, 700), (ServiceClass::Normal, 0)]);
    }

    #[test]
    fn tickets_a_relay_receives_reach_its_operator_two_intervals_later_taxed() {
        let mut p = params();
        p.free_period = SimDuration::from_secs(1000); // one handout in the test's span
        p.tax = 0.5;
        let mut b = braids(p);
        b.on_circuit_created(at(0), 0, WEB, &[GUARD, MIDDLE, EXIT]);
        // WEB spends its 3 tickets at the operator's guard in interval 0.
        b.classify(at(1), 0, 1, 3 * 256);
        assert_eq!(b.balance(WEB, at(1)), 0);
        // OPERATOR's own 3 free tickets of interval 0 go unspent.
        assert_eq!(b.balance(OPERATOR, at(1)), 3);
        // Interval 1: nothing new yet (the exchange happens during 1, spendable in 2).
        assert_eq!(b.balance(OPERATOR, at(150)), 0);
        // Interval 2: its 3 unspent free tickets (carry: 1.5 -> 1 taxed, 0.5 carried) and
        // the guard's 3 received (relay carry: 1.5 -> 1 taxed) come back: 2 + 2.
        assert_eq!(b.balance(OPERATOR, at(250)), 4);
        let c = b.ticket_counters();
        assert_eq!((c.exchanged, c.taxed, c.earned_by_operators), (6, 2, 2));
        // WEB had nothing unspent: its wallet stays empty.
        assert_eq!(b.balance(WEB, at(250)), 0);
    }

    #[test]
    fn free_tickets_can_be_made_to_need_an_exchange() {
        let mut p = params();
        p.free_tickets_need_exchange = true;
        let mut b = braids(p);
        assert_eq!(b.balance(WEB, at(0)), 0);
        // Handouts at 0 and 50 (interval 0) are spendable in interval 2.
        assert_eq!(b.balance(WEB, at(199)), 0);
        assert_eq!(b.balance(WEB, at(200)), 6);
    }

    #[test]
    fn counters_settle_every_account_and_count_the_banks_bytes() {
        let mut b = braids(params());
        b.on_circuit_created(at(0), 0, BULK, &[MIDDLE, GUARD, EXIT]);
        b.classify(at(0), 0, 1, 256); // one ticket to MIDDLE, a relay nobody operates
        let c: BTreeMap<String, u64> = b.counters(at(250)).into_iter().collect();
        // 3 paying clients x handouts at 0, 50, 100, 150, 200, 250: 18 tickets each.
        assert_eq!(c["braids_tickets_issued_free"], 54);
        assert_eq!(c["braids_tickets_earned_unused"], 1);
        // Exchanged: intervals 0 and 1 closed for 3 wallets: 6 tickets each interval each
        // (one of BULK's spent), plus MIDDLE's one.
        assert_eq!(c["braids_tickets_exchanged"], 6 * 6 - 1 + 1);
        assert_eq!(c["braids_bank_exchange_bytes"], 36 * 488);
    }

    #[test]
    fn a_client_that_joins_late_gets_no_handouts_from_before() {
        // Joins at 120 s: handouts at 120 and 170 s (interval 1), 220 s (interval 2); none
        // for 0-119 s (the old count gave it those of 0, 50 and 100 s too).
        let mut b = braids(params());
        b.set_joined(WEB, at(120));
        assert_eq!(b.balance(WEB, at(119)), 0);
        assert_eq!(b.balance(WEB, at(120)), 3);
        assert_eq!(b.balance(WEB, at(199)), 6);
        let c: BTreeMap<String, u64> = b.counters(at(220)).into_iter().collect();
        // WEB: 3 handouts; BULK and OPERATOR from 0: 0, 50, ..., 200 (5 each).
        assert_eq!(c["braids_tickets_issued_free"], 3 * (3 + 5 + 5));
    }

    #[test]
    fn an_operator_is_served_at_its_own_relay_without_a_ticket() {
        // OPERATOR runs GUARD. Its circuit through GUARD pays MIDDLE and EXIT only: 1000
        // low-latency cells at GUARD cost nothing, and the 3 tickets go to the other hops.
        let mut b = braids(params());
        b.on_circuit_created(at(0), 0, OPERATOR, &[GUARD, MIDDLE, EXIT]);
        assert_eq!(b.classify(at(1), 0, 1, 1000), [(ServiceClass::LowLatency, 1000), (ServiceClass::Normal, 0)]);
        assert_eq!(b.balance(OPERATOR, at(1)), 3);
        assert_eq!(b.classify(at(1), 0, 2, 256)[0], (ServiceClass::LowLatency, 256));
        assert_eq!(b.classify(at(1), 0, 3, 512)[0], (ServiceClass::LowLatency, 512));
        assert_eq!(b.balance(OPERATOR, at(1)), 0);
        let c = b.ticket_counters();
        assert_eq!((c.spent, c.cells_low_latency, c.cells_own_relay), (3, 1768, 1000));
        let held: BTreeMap<String, u64> = b.counters(at(1)).into_iter().collect();
        assert_eq!(held["braids_tickets_held_by_relays"], 3, "MIDDLE 1 and EXIT 2, GUARD none");
    }

    #[test]
    fn every_ticket_issued_is_held_taxed_or_earned() {
        // Ledger: a ticket is in a wallet, with a relay that has not exchanged it yet,
        // destroyed by the tax, or exchanged by a relay nobody in the run operates.
        let mut p = params();
        p.tax = 0.3;
        let mut b = braids(p);
        let mut circ = 0;
        for step in 0..60u64 {
            let client = [WEB, BULK, OPERATOR][(step % 3) as usize];
            let path = [[GUARD, MIDDLE, EXIT], [MIDDLE, GUARD, EXIT], [EXIT, MIDDLE, GUARD]][(step % 2) as usize];
            if step % 5 == 0 {
                circ += 1;
                b.on_circuit_created(at(step * 7), circ, client, &path);
            }
            b.classify(at(step * 7), circ, 1 + (step % 3) as usize, 100 + 37 * step as u32);
        }
        let c: BTreeMap<String, u64> = b.counters(at(60 * 7)).into_iter().collect();
        assert!(c["braids_tickets_spent"] > 10 && c["braids_tickets_taxed"] > 0 && c["braids_tickets_earned_by_operators"] > 0, "{c:?}");
        assert_eq!(
            c["braids_tickets_issued_free"],
            c["braids_tickets_held_by_clients"]
                + c["braids_tickets_held_by_relays"]
                + c["braids_tickets_taxed"]
                + c["braids_tickets_earned_unused"],
            "{c:?}"
        );
    }

    #[test]
    fn bad_parameters_name_the_field() {
        let mut p = params();
        p.tax = 1.5;
        assert_eq!(Braids::new(p, &[], &[]).unwrap_err().to_string(), "tax: must lie in [0, 1], got 1.5");
        let mut p = params();
        p.ticket_cells = 0;
        assert!(Braids::new(p, &[], &[]).unwrap_err().to_string().starts_with("ticket_cells"));
        let mut p = params();
        p.spending_interval = SimDuration::ZERO;
        assert!(Braids::new(p, &[], &[]).unwrap_err().to_string().starts_with("spending_interval"));
        let mut p = params();
        p.low_latency_window = SimDuration::ZERO;
        assert!(Braids::new(p, &[], &[]).unwrap_err().to_string().starts_with("low_latency_window"));
        let mut p = params();
        p.free_period = SimDuration::ZERO;
        assert!(Braids::new(p, &[], &[]).unwrap_err().to_string().starts_with("free_period"));
        // No free tickets: no handouts, so no period is needed.
        p.free_tickets = 0;
        assert!(Braids::new(p, &[], &[]).is_ok());
        // The tax is a fraction in [0, 1], both ends included (the config accepts 1).
        let mut p = params();
        p.tax = 1.0;
        assert!(Braids::new(p, &[], &[]).is_ok());
    }
}
