//! PredicTor: distributed model-predictive control of circuits' rates for max-min
//! fairness and low latency (Döpmann, Fiedler, Lucia, Tschorsch, "Optimization-Based
//! Predictive Congestion Control for the Tor Network: Opportunities and Challenges", ACM
//! TOIT 22(4), 2022; spec `predictor.md`).
//!
//! **Owns:** the max-min fair reference and the fairness index ([`maxmin`]), each relay's
//! local optimal control problem ([`ocp`], the paper's problem (25)), and the closed loop
//! that solves it every step on every relay and shapes circuits to the plans
//! ([`controller`]). **Must not touch:** relay internals; the controller acts through
//! `RelayControl`, on relays whose circuit scheduler shapes circuits
//! (`onionlab_tor::shaped`).

pub mod controller;
pub mod maxmin;
pub mod ocp;

pub use controller::{Exchange, PredictorError, PredictorHook, PredictorParams, RMax, SharedExchange};
pub use maxmin::{fairness_index, max_min_fair, theorem1_rates, MaxMinError};
