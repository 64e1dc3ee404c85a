//! PredicTor: distributed model-predictive control of circuits' rates for max-min
//! fairness and low latency (Schuster, Wiesner, Rieck, Hoffmann, Stöcker, "PredicTor:
//! Predictive Congestion Control for the Tor Network", TOIT; spec `predictor.md`).
//!
//! **Owns:** the paper's pieces as functions of their inputs: the max-min fair reference
//! and the fairness index ([`maxmin`]), and each relay's local optimal control problem
//! ([`ocp`], the paper's problem (25)). **Must not touch:** the Tor model.

pub mod maxmin;
pub mod ocp;

pub use maxmin::{fairness_index, max_min_fair, theorem1_rates, MaxMinError};
