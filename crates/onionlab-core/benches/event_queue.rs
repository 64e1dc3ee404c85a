//! Event-queue throughput: the classic hold model (pop the earliest event, schedule one
//! new event a random delay later) at several queue sizes. Prints events per second.

use criterion::{black_box, criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use onionlab_core::{EventClass, EventQueue, RngStreams, SimDuration, SimTime};
use rand::Rng;

#[derive(Clone, Copy)]
struct Payload {
    _target: u32,
    _a: u64,
    _b: u64,
}

fn hold(c: &mut Criterion) {
    let mut g = c.benchmark_group("event_queue_hold");
    const OPS: u64 = 100_000;
    g.throughput(Throughput::Elements(OPS));
    for &size in &[1_000usize, 10_000, 100_000] {
        let mut rng = RngStreams::new(1).stream("bench", "hold");
        let delays: Vec<u64> = (0..4096).map(|_| rng.random_range(1..1_000_000)).collect();
        let mut q = EventQueue::with_capacity(size + 1);
        for i in 0..size {
            q.schedule(
                SimTime::from_nanos(delays[i % delays.len()]),
                EventClass((i % 4) as u8),
                Payload { _target: i as u32, _a: 0, _b: 0 },
            )
            .unwrap();
        }
        let mut k = 0usize;
        g.bench_with_input(BenchmarkId::from_parameter(size), &size, |b, _| {
            b.iter(|| {
                for _ in 0..OPS {
                    let ev = q.pop().unwrap();
                    k = (k + 1) & 4095;
                    q.schedule_in(SimDuration::from_nanos(delays[k]), ev.class, black_box(ev.event));
                }
            })
        });
    }
    g.finish();
}

criterion_group!(benches, hold);
criterion_main!(benches);
