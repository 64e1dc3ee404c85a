// TEMPORARY stub, replaced by helper's version.
use onionlab_core::SimDuration;
pub struct LatencyMatrix { n: usize, lat: Vec<SimDuration>, loss: Vec<f64> }
impl LatencyMatrix { pub fn new(l: Vec<Vec<SimDuration>>, loss: Option<Vec<Vec<f64>>>) -> Result<Self, String> { let n = l.len(); Ok(LatencyMatrix{ n, lat: l.concat(), loss: loss.map(|x| x.concat()).unwrap_or(vec![0.0; n*n]) }) } }
pub enum LatencyModel { Constant { one_way: SimDuration }, Matrix(LatencyMatrix) }
impl LatencyModel {
    pub fn constant(one_way: SimDuration) -> Self { LatencyModel::Constant { one_way } }
    pub fn one_way(&self, a: u32, b: u32) -> SimDuration { match self { LatencyModel::Constant { one_way } => *one_way, LatencyModel::Matrix(m) => m.lat[a as usize * m.n + b as usize] } }
    pub fn loss(&self, a: u32, b: u32) -> f64 { match self { LatencyModel::Constant { .. } => 0.0, LatencyModel::Matrix(m) => m.loss[a as usize * m.n + b as usize] } }
    pub fn validate_location(&self, _l: u32) -> Result<(), String> { Ok(()) }
}
