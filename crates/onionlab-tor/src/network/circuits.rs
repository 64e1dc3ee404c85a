//! A client's circuits: starting streams on them, choosing the circuit a stream takes,
//! predicted circuits and circuit-build-time test circuits, and building circuits hop by
//! hop over channels (opened on demand between each pair of nodes).
//!
//! **Owns:** the client side of tor's circuituse.c and circuitbuild.c as the model has it.
//! **Must not touch:** cells once a circuit carries them (the parent module's cell
//! handling) or the per-node I/O loop ([`super::pump`]).

use super::PathOrder;
use super::{
    ConnRole, TorError, TorEvent, TorNetwork, CBT_MIN_CIRCUITS_TO_OBSERVE, MAX_UNUSED_OPEN_CIRCUITS, MIN_CIRCUITS_HANDLING_STREAM,
    PREDICTED_CIRCS_RELEVANCE_TIME, TOR_EVENT_CLASS, UNLIMITED_STREAM_WINDOW,
};
use crate::cell::{CellKind, CellRun, Direction};
use crate::channel::{ChanEnd, Channel};
use crate::circuit::{Circuit, CircuitState, Stream, CIRCUIT_NODES};
use crate::flow_control::STREAMWINDOW_START;
use crate::node::{NodeId, NodeKind};
use crate::path::{PathSelector, Position};
use crate::token_bucket::TokenBucket;
use crate::transit::TransitLedger;
use onionlab_core::{EventQueue, SimDuration, SimTime};
use onionlab_net::{ConnId, Side};

impl TorNetwork {
    /// Starts a stream from `client` fetching `bytes` from `server`. The stream takes the
    /// client's best circuit that can take it (`best_circuit`), else a new one.
    /// Returns the stream's id, which names it until it finishes: a finished stream's id
    /// is given to a later stream (its [`StreamRecord`](crate::circuit::StreamRecord) keeps what it was).
    pub fn start_stream(
        &mut self,
        q: &mut EventQueue<TorEvent>,
        client: NodeId,
        server: NodeId,
        bytes: u64,
        tag: u64,
    ) -> Result<u32, TorError> {
        if self.nodes[client as usize].kind != NodeKind::Client {
            return Err(TorError::WrongKind(client, "client"));
        }
        if self.nodes[server as usize].kind != NodeKind::Server {
            return Err(TorError::WrongKind(server, "server"));
        }
        let now = q.now();
        if self.cfg.predicted_circuits {
            self.note_port_used(q, client);
        }
        let circ = match self.best_circuit(client, now) {
            Some(c) => c,
            None => self.build_circuit(q, client)?,
        };
        let id = self.free_streams.pop().unwrap_or(self.streams.len() as u32);
        let c = &mut self.circuits[circ as usize];
        if c.dirty_since.is_none() {
            c.dirty_since = Some(now);
            q.schedule_in(self.cfg.max_circuit_dirtiness, TOR_EVENT_CLASS, TorEvent::CircuitExpire { circ });
        }
        let idx = c.streams.len() as u16;
        c.streams.push(id);
        c.live.push(id);
        let stream = Stream {
            client,
            server,
            circ,
            idx,
            bytes,
            tag,
            start: now,
            begin_sent: None,
            connected: None,
            first_byte: None,
            done: false,
            exit_conn: None,
            exit_read: 0,
            exit_inbuf: 0,
            // With congestion control on, XON/XOFF replaces stream windows; the client
            // reads what arrives at once, so it never sends XOFF: no limit.
            package_window: if self.cfg.congestion_control.stream_windows() { STREAMWINDOW_START } else { UNLIMITED_STREAM_WINDOW },
            packaged_cells: 0,
            sendmes_sent: 0,
            sendmes_received: 0,
            in_read_ring: false,
            request_written: 0,
            request_cells: 0,
            request_waits_for_refill: false,
            request_read: 0,
            server_written: 0,
            delivered_cells: 0,
            deliver_window: STREAMWINDOW_START,
        };
        match self.streams.get_mut(id as usize) {
            Some(slot) => *slot = stream,
            None => self.streams.push(stream),
        }
        if self.circuits[circ as usize].state == CircuitState::Open {
            self.send_begin(q, circ, idx);
        } else {
            self.circuits[circ as usize].pending_begins.push(idx);
        }
        if self.cfg.predicted_circuits {
            // A port predicted again after an hour without streams.
            self.schedule_prediction(q, client);
        }
        self.flush_dirty(q);
        Ok(id)
    }

    /// Whether `circ` could take a new stream now: not closed, clean or dirty for less
    /// than MaxCircuitDirtiness, and with stream ids left (ids are 16 bits; tor gives up
    /// on a circuit that has run out of them, `get_unique_stream_id_by_circ`).
    fn takes_streams(&self, circ: u32, now: SimTime) -> bool {
        let c = &self.circuits[circ as usize];
        c.state != CircuitState::Closed
            && c.dirty_since.is_none_or(|d| now.saturating_since(d) < self.cfg.max_circuit_dirtiness)
            && c.streams.len() <= u16::MAX as usize
    }

    /// The circuit a new stream of `client` takes, as tor's `circuit_get_best` picks it:
    /// an open circuit if there is one, else one being built; among those, a dirty circuit
    /// before a clean one (`circuit_is_better`), the most recently dirtied of the dirty
    /// ones and the most recently created of the clean ones. `None`: build a new one.
    fn best_circuit(&self, client: NodeId, now: SimTime) -> Option<u32> {
        let rank = |c: &Circuit| (c.state == CircuitState::Open, c.dirty_since.is_some(), c.dirty_since.unwrap_or(c.created_at));
        let mut best: Option<u32> = None;
        for &circ in &self.nodes[client as usize].circs {
            if !self.takes_streams(circ, now) {
                continue;
            }
            // Strictly better only: of equals, the oldest circuit in the list wins.
            if best.is_none_or(|b| rank(&self.circuits[circ as usize]) > rank(&self.circuits[b as usize])) {
                best = Some(circ);
            }
        }
        best
    }

    /// A stream of `client` is starting: its tor starts now if it has not (and runs its
    /// first check for predicted circuits at once), and the port is predicted for another
    /// `PREDICTED_CIRCS_RELEVANCE_TIME` (`rep_hist_note_used_port`).
    fn note_port_used(&mut self, q: &mut EventQueue<TorEvent>, client: NodeId) {
        let now = q.now();
        let p = &mut self.nodes[client as usize].predict;
        p.until = now + PREDICTED_CIRCS_RELEVANCE_TIME;
        if p.started.is_none() {
            p.started = Some(now);
            self.predict_and_launch(q, client);
        }
    }

    /// Whether `client` would launch a circuit for its predicted port now: the port is
    /// predicted, it has fewer than `MAX_UNUSED_OPEN_CIRCUITS` clean circuits and fewer
    /// than `MIN_CIRCUITS_HANDLING_STREAM` circuits that could take a stream
    /// (`circuit_stream_is_being_handled`).
    fn needs_predicted_circuit(&self, client: NodeId, now: SimTime) -> bool {
        let n = &self.nodes[client as usize];
        if !self.cfg.predicted_circuits || n.predict.started.is_none() || now >= n.predict.until {
            return false;
        }
        let handling = n.circs.iter().filter(|&&c| self.takes_streams(c, now)).count();
        self.clean_circuits(client) < MAX_UNUSED_OPEN_CIRCUITS && handling < MIN_CIRCUITS_HANDLING_STREAM
    }

    fn clean_circuits(&self, client: NodeId) -> usize {
        self.nodes[client as usize].circs.iter().filter(|&&c| self.circuits[c as usize].dirty_since.is_none()).count()
    }

    /// When `client` will want a build-time test circuit, if it learns build times:
    /// `test_frequency` after its last launch, while it has completed fewer than
    /// `CBT_MIN_CIRCUITS_TO_OBSERVE` and has fewer than `max_clean` clean circuits
    /// (`circuit_build_times_needs_circuits_now`, `needs_circuits_for_build`). A check
    /// launches one at a time strictly later than that.
    fn test_circuit_due(&self, client: NodeId) -> Option<SimTime> {
        let cbt = self.cfg.cbt_learning?;
        let p = &self.nodes[client as usize].predict;
        let wanted = self.cfg.predicted_circuits
            && p.started.is_some()
            && p.built < CBT_MIN_CIRCUITS_TO_OBSERVE
            && self.clean_circuits(client) < cbt.max_clean;
        wanted.then(|| p.last_launch + cbt.test_frequency)
    }

    /// Tor's once-a-second `circuit_predict_and_launch_new`, which launches at most one
    /// circuit per call: for the predicted port first, else a build-time test circuit.
    /// Run now (at a client's start-up) or from [`TorEvent::PredictCircuits`]; schedules
    /// the next check that would launch one. A launch can fail where a path was found
    /// before: the client's guard is drawn afresh for each circuit, and guard-first one
    /// guard may leave no exit (`NoPath`; exit-first takes another guard instead). Tor
    /// logs such a failure and tries again at its next check; so does the model, counting
    /// it (`predicted_launches_failed`). A stream that finds no circuit builds its own,
    /// and its failure is the run's error, as without prediction.
    pub(super) fn predict_and_launch(&mut self, q: &mut EventQueue<TorEvent>, client: NodeId) {
        let now = q.now();
        let launch = self.needs_predicted_circuit(client, now) || self.test_circuit_due(client).is_some_and(|due| now > due);
        if launch && self.build_circuit(q, client).is_err() {
            self.counters.predicted_launches_failed += 1;
        }
        self.schedule_prediction(q, client);
    }

    /// Schedules `client`'s next check that would launch a circuit: the first whole
    /// second (counted from its start) after now for its port, or after a test circuit
    /// falls due; an earlier need than the scheduled check schedules another. Called
    /// where a need may arise: a circuit stopped taking streams (its dirtiness ran out,
    /// or it closed), a check or launch, or a stream made the port predicted again.
    pub(super) fn schedule_prediction(&mut self, q: &mut EventQueue<TorEvent>, client: NodeId) {
        let now = q.now();
        let after = if self.needs_predicted_circuit(client, now) {
            now
        } else {
            match self.test_circuit_due(client) {
                Some(due) => due.max(now),
                None => return,
            }
        };
        let p = &mut self.nodes[client as usize].predict;
        let started = p.started.expect("only started clients need circuits");
        let second = SimDuration::from_secs(1).as_nanos();
        let since = after.saturating_since(started).as_nanos();
        // The first whole second strictly after `after`: tor's check runs once per second,
        // and the one of this second (if any) has run already.
        let at = started + SimDuration::from_nanos((since / second + 1) * second);
        if p.check_at.is_some_and(|t| t <= at) {
            return;
        }
        p.check_at = Some(at);
        q.schedule_in(at.saturating_since(now), TOR_EVENT_CLASS, TorEvent::PredictCircuits { client });
    }

    fn build_circuit(&mut self, q: &mut EventQueue<TorEvent>, client: NodeId) -> Result<u32, TorError> {
        let num_guards = self.cfg.num_entry_guards.max(1);
        // Taken out while it draws: the path selector borrows the network.
        let mut parked = self.nodes[client as usize].rng.take().expect("clients have an rng");
        let mut guards = self.nodes[client as usize].guards.clone();
        let bridge = self.nodes[client as usize].bridge;
        let fixed = self.nodes[client as usize].fixed_path;
        let use_guards = self.cfg.use_entry_guards;
        let (order, num_primary, distinct) =
            (self.cfg.path_order, self.cfg.num_primary_guards.max(num_guards), self.cfg.distinct_guard_subnets);
        let result = parked.with(|rng| {
            if let Some(p) = fixed {
                return Ok(p);
            }
            let sel = self.selector()?;
            if let Some(b) = bridge {
                return sel.choose_path_via(rng, b).map_err(|pos| no_path(sel, pos));
            }
            if !use_guards {
                return sel.choose_path(rng, None).map_err(|pos| no_path(sel, pos));
            }
            // The guards a client samples (in order; the first ones are in use): tor
            // 0.2.2 keeps them in distinct /16s, tor 0.4.8 has no such rule.
            let sample = |rng: &mut onionlab_core::SimRng, guards: &[usize], avoid: Option<usize>| {
                let mut exclude = guards.to_vec();
                exclude.extend(avoid);
                let subnets: &[usize] = if distinct { &exclude } else { avoid.as_slice() };
                sel.choose_apart(Position::Guard, rng, &exclude, subnets)
            };
            let wanted = if order == PathOrder::ExitFirst { num_primary } else { num_guards };
            while guards.len() < wanted {
                match sample(rng, &guards, None) {
                    Some(g) => guards.push(g),
                    None if guards.is_empty() => return Err(no_path(sel, Position::Guard)),
                    None => break,
                }
            }
            if order == PathOrder::GuardFirst {
                let guard = guards[rand::Rng::random_range(rng, 0..guards.len())];
                return sel.choose_path(rng, Some(guard)).map_err(|pos| no_path(sel, pos));
            }
            // Tor's order: the exit from every exit, then a guard that obeys it.
            let exit = sel.choose(Position::Exit, rng, &[]).ok_or_else(|| no_path(sel, Position::Exit))?;
            let guard = match sel.guard_for_exit(rng, &guards, num_primary, num_guards, exit) {
                Some(g) => g,
                None => {
                    // Every guard conflicts with the exit: tor samples further guards
                    // (select_filtered_guard_for_circuit); the new one stays in the sample.
                    let g = sample(rng, &guards, Some(exit)).ok_or_else(|| no_path(sel, Position::Guard))?;
                    guards.push(g);
                    g
                }
            };
            let middle = sel.choose(Position::Middle, rng, &[guard, exit]).ok_or_else(|| no_path(sel, Position::Middle))?;
            Ok([guard, middle, exit])
        });
        self.nodes[client as usize].rng = Some(parked);
        let path = result?;
        self.nodes[client as usize].guards = guards;
        let nodes = [client, self.relays[path[0]], self.relays[path[1]], self.relays[path[2]]];
        let circuit = Circuit {
            nodes,
            chans: [None; CIRCUIT_NODES - 1],
            queues: Default::default(),
            policy: Default::default(),
            built: 0,
            lower_initiates: [false; CIRCUIT_NODES - 1],
            limited: false,
            limits: None,
            state: CircuitState::Building,
            close_reason: None,
            cells_out: 0,
            created_at: q.now(),
            at_exit: TransitLedger::new(q.now()),
            in_overlay: TransitLedger::new(q.now()),
            opened_at: None,
            dirty_since: None,
            streams: Vec::new(),
            live: Vec::new(),
            expired: false,
            edge_blocked: false,
            pending_begins: Vec::new(),
            cc_client: self.cfg.congestion_control.build(self.cfg.circ_window, self.cfg.circ_window_increment),
            cc_exit: self.cfg.congestion_control.build(self.cfg.circ_window, self.cfg.circ_window_increment),
            rate_limit: None,
        };
        let id = match self.free_circuits.pop() {
            Some(id) => {
                self.circuits[id as usize] = circuit;
                id
            }
            None => {
                self.circuits.push(circuit);
                self.circuits.len() as u32 - 1
            }
        };
        self.nodes[client as usize].circs.push(id);
        if let Some(s) = self.incentive.as_mut() {
            s.on_circuit_created(q.now(), id, client, &nodes[1..]);
        }
        self.nodes[client as usize].predict.last_launch = q.now();
        if self.cfg.predicted_circuits {
            q.schedule_in(self.cfg.circuit_idle_timeout, TOR_EVENT_CLASS, TorEvent::CircuitIdle { circ: id });
        }
        self.extend_to(q, id, 0);
        Ok(id)
    }

    /// Node at `pos` sends CREATE to `pos + 1`, opening a channel if there is none.
    pub(super) fn extend_to(&mut self, q: &mut EventQueue<TorEvent>, circ: u32, pos: usize) {
        let (a, b) = {
            let c = &self.circuits[circ as usize];
            (c.nodes[pos], c.nodes[pos + 1])
        };
        let chan = self.channel_between(q, a, b);
        self.circuits[circ as usize].chans[pos] = Some(chan);
        self.circuits[circ as usize].lower_initiates[pos] = self.chans[chan as usize].nodes[0] == a;
        self.chans[chan as usize].circuits += 1;
        let ends = self.chans[chan as usize].nodes;
        if !self.nodes[ends[0] as usize].circuit_limits.is_empty() || !self.nodes[ends[1] as usize].circuit_limits.is_empty() {
            self.on_circuit_joins_channel(q.now(), circ, chan);
        }
        let run = CellRun { circ, count: 1, dir: Direction::Out, kind: CellKind::Create, target: (pos + 1) as u8, stream: 0 };
        self.emit(q.now(), circ, pos, run);
    }

    fn channel_between(&mut self, q: &mut EventQueue<TorEvent>, a: NodeId, b: NodeId) -> u32 {
        let key = (a.min(b), a.max(b));
        let shared = !self.cfg.channel_per_circuit;
        if let Some(&c) = self.chan_by_pair.get(&key).filter(|_| shared) {
            return c;
        }
        let (ha, hb) = (self.nodes[a as usize].host, self.nodes[b as usize].host);
        let conn = self.net.connect(q, ha, hb).expect("hosts of two distinct nodes");
        if self.cfg.wire_waits && self.nodes[a as usize].waits.is_some() && self.nodes[b as usize].waits.is_some() {
            // Between relays: how long cells wait in the kernel, on the link and unread at
            // the next relay (the wire's parts in the wait ledgers; clients read what
            // arrives at once, and a relay's channels to them are not split).
            self.net.track_waits(q.now(), conn);
        }
        let id = self.chans.len() as u32;
        let mut ends = [
            ChanEnd::new(self.nodes[a as usize].scheduler.build(), conn, a),
            ChanEnd::new(self.nodes[b as usize].scheduler.build(), conn, b),
        ];
        // PerConnBWRate/Burst apply to a relay's connections from clients
        // (connection_or_update_token_buckets_helper).
        if self.nodes[a as usize].kind == NodeKind::Client {
            if let Some((rate, burst)) = self.nodes[b as usize].perconn {
                ends[1].conn_read = Some(TokenBucket::new(rate, burst));
                ends[1].conn_write = Some(TokenBucket::new(rate, burst));
            }
        }
        let client_end = self.nodes[a as usize].kind == NodeKind::Client || self.nodes[b as usize].kind == NodeKind::Client;
        let idle_timeout = self.cfg.idle_channel_timeout.map_or(SimDuration::ZERO, |t| t.draw(client_end, &mut self.idle_rng));
        self.chans.push(Channel {
            conn,
            nodes: [a, b],
            open: false,
            closed: false,
            circuits: 0,
            idle_since: q.now(),
            idle_timeout,
            conn_bucket_empty_intervals: [0; 2],
            ends,
        });
        if shared {
            self.chan_by_pair.insert(key, id);
        }
        self.set_role(conn, ConnRole::Channel(id));
        self.nodes[a as usize].chans.push((id, Side::Initiator));
        self.nodes[b as usize].chans.push((id, Side::Acceptor));
        id
    }

    pub(super) fn set_role(&mut self, conn: ConnId, role: ConnRole) {
        let i = conn.0 as usize;
        if self.conn_role.len() <= i {
            self.conn_role.resize(i + 1, ConnRole::Channel(u32::MAX));
        }
        self.conn_role[i] = role;
    }

    pub(super) fn send_begin(&mut self, q: &mut EventQueue<TorEvent>, circ: u32, idx: u16) {
        if let Some(sid) = self.live_stream(circ, idx) {
            self.streams[sid as usize].begin_sent = Some(q.now());
        }
        let exit = self.circuits[circ as usize].exit_pos();
        let run = CellRun { circ, count: 1, dir: Direction::Out, kind: CellKind::Begin, target: exit as u8, stream: idx };
        self.emit(q.now(), circ, 0, run);
    }
}

/// The error for a path `sel` could not complete at `pos`: if no relay weighs more than 0
/// there, the network cannot fill it at all; otherwise the draw ran out of relays distinct
/// from (and outside the /16s of) the path's others.
fn no_path(sel: &PathSelector, pos: Position) -> TorError {
    if sel.total_weight(pos) == 0.0 {
        TorError::NoWeightedRelay(pos)
    } else {
        TorError::NoPath(pos)
    }
}
