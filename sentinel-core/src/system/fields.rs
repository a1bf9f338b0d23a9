//! A system rule's fields, for the codecs: each threshold's name in a
//! rule file and in Sentinel's JSON (which writes an unset one as -1).

use super::SystemRule;
use crate::rule::RuleError;
use crate::rule::describe::{Describe, DescribeRule, Fields, Name};

impl Describe for SystemRule {
    fn describe<F: Fields>(&mut self, f: &mut F) {
        f.optional_whole(Name::new("id", "id").last(), &mut self.id);
        let load = Name::new("highest_system_load", "highestSystemLoad").unset_negative();
        f.optional_number(load, &mut self.highest_system_load);
        let cpu = Name::new("highest_cpu_usage", "highestCpuUsage").unset_negative();
        f.optional_number(cpu, &mut self.highest_cpu_usage);
        f.optional_number(Name::new("qps", "qps").unset_negative(), &mut self.qps);
        let rt = Name::new("avg_rt", "avgRt").unset_negative();
        f.optional_whole(rt, &mut self.avg_rt);
        let threads = Name::new("max_thread", "maxThread").unset_negative();
        f.optional_whole(threads, &mut self.max_thread);
    }
}

impl DescribeRule for SystemRule {
    const KIND: &'static str = super::rule::KIND_NAME;
    const FILE_ORDER: u32 = 2;

    fn problems(&self, index: usize, _max_name_len: usize) -> Vec<RuleError> {
        SystemRule::problems(self, index)
    }
}
