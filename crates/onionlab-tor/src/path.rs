// TEMPORARY stub; replaced by the real module.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct RelayFlags(pub u16);
impl RelayFlags { pub const GUARD: RelayFlags = RelayFlags(1); pub const EXIT: RelayFlags = RelayFlags(2); pub const FAST: RelayFlags = RelayFlags(4); pub const STABLE: RelayFlags = RelayFlags(8);
  pub fn contains(self, o: RelayFlags) -> bool { self.0 & o.0 == o.0 }
  pub fn from_names<'a>(names: impl IntoIterator<Item = &'a str>) -> RelayFlags { let mut f = RelayFlags(0); for n in names { f = f | match n { "Guard" => RelayFlags::GUARD, "Exit" => RelayFlags::EXIT, "Fast" => RelayFlags::FAST, "Stable" => RelayFlags::STABLE, _ => RelayFlags(0) }; } f } }
impl std::ops::BitOr for RelayFlags { type Output = RelayFlags; fn bitor(self, o: RelayFlags) -> RelayFlags { RelayFlags(self.0 | o.0) } }
#[derive(Clone, Debug)] pub struct RelayInfo { pub nickname: String, pub bandwidth: u64, pub flags: RelayFlags }
#[derive(Clone, Copy, Debug, PartialEq, Eq)] pub enum Position { Guard, Middle, Exit }
#[derive(Clone, Debug, PartialEq)] pub struct BandwidthWeights;
impl BandwidthWeights { pub fn uniform() -> Self { BandwidthWeights }
  pub fn from_pairs<'a>(_p: impl IntoIterator<Item = (&'a str, i64)>, _scale: i64) -> Result<Self, PathError> { Ok(BandwidthWeights) } }
#[derive(Debug, Clone, PartialEq, thiserror::Error)] pub enum PathError { #[error("no relays")] NoRelays }
pub struct PathSelector { r: Vec<RelayInfo> }
impl PathSelector {
  pub fn new(relays: &[RelayInfo], _w: BandwidthWeights) -> Result<Self, PathError> { Ok(PathSelector { r: relays.to_vec() }) }
  pub fn choose<R: rand::Rng + ?Sized>(&self, pos: Position, rng: &mut R, exclude: &[usize]) -> Option<usize> {
    let el: Vec<usize> = (0..self.r.len()).filter(|i| !exclude.contains(i) && match pos { Position::Guard => self.r[*i].flags.contains(RelayFlags::GUARD), Position::Exit => self.r[*i].flags.contains(RelayFlags::EXIT), _ => true }).collect();
    if el.is_empty() { None } else { Some(el[rng.random_range(0..el.len())]) } }
  pub fn choose_path<R: rand::Rng + ?Sized>(&self, rng: &mut R, guard: Option<usize>) -> Option<[usize; 3]> {
    let g = guard?; let e = self.choose(Position::Exit, rng, &[g])?; let m = self.choose(Position::Middle, rng, &[g, e])?; Some([g, m, e]) }
}
