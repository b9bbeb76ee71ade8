//! Five-field cron schedules for `--snapshot_cron`: parsing (numbers, names, ranges, steps,
//! lists and `@` macros) and finding the next minute a schedule fires. Times are UTC unix
//! seconds; the calendar math is done here (no time-zone or date crate).
//!
//! Never: imports anything of Strata's, or searches further than five years ahead.

use std::fmt;
use std::str::FromStr;

/// How far ahead [`CronSchedule::next_after`] searches before giving up (5 years, leap days
/// included).
const SEARCH_DAYS: i64 = 5 * 366;

const MONTH_NAMES: &[&str] = &[
    "JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC",
];
const DAY_NAMES: &[&str] = &["SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"];

/// One of the five fields: its name (for errors), its allowed values, and the names that may
/// stand for values (`names[i]` is `min + i`).
struct Field {
    name: &'static str,
    min: u32,
    max: u32,
    names: &'static [&'static str],
}

const MINUTE: Field = Field {
    name: "minute",
    min: 0,
    max: 59,
    names: &[],
};
const HOUR: Field = Field {
    name: "hour",
    min: 0,
    max: 23,
    names: &[],
};
const DAY_OF_MONTH: Field = Field {
    name: "day-of-month",
    min: 1,
    max: 31,
    names: &[],
};
const MONTH: Field = Field {
    name: "month",
    min: 1,
    max: 12,
    names: MONTH_NAMES,
};
/// 7 is accepted as Sunday and folded onto 0 after parsing.
const DAY_OF_WEEK: Field = Field {
    name: "day-of-week",
    min: 0,
    max: 7,
    names: DAY_NAMES,
};

/// A parsed cron schedule: one bitset per field (bit `v` set when value `v` matches).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CronSchedule {
    text: String,
    /// Bits 0..=59.
    minutes: u64,
    /// Bits 0..=23.
    hours: u64,
    /// Bits 1..=31.
    days_of_month: u64,
    /// Bits 1..=12.
    months: u64,
    /// Bits 0..=6, Sunday = 0.
    days_of_week: u64,
    /// The day-of-month field began with `*` (unrestricted, in Vixie cron's sense).
    dom_star: bool,
    /// The day-of-week field began with `*`.
    dow_star: bool,
}

/// Why a cron expression was rejected; the message names the expression, the field and the
/// offending text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CronError(pub String);

impl fmt::Display for CronError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for CronError {}

impl FromStr for CronSchedule {
    type Err = CronError;

    fn from_str(s: &str) -> Result<Self, CronError> {
        let fail = |detail: String| CronError(format!("invalid cron expression '{s}': {detail}"));
        let trimmed = s.trim();
        let expanded = if let Some(name) = trimmed.strip_prefix('@') {
            match name.to_ascii_lowercase().as_str() {
                "yearly" | "annually" => "0 0 1 1 *",
                "monthly" => "0 0 1 * *",
                "weekly" => "0 0 * * 0",
                "daily" | "midnight" => "0 0 * * *",
                "hourly" => "0 * * * *",
                _ => return Err(fail(format!("unknown macro '{trimmed}'"))),
            }
        } else {
            trimmed
        };
        let fields: Vec<&str> = expanded.split_ascii_whitespace().collect();
        let [minute, hour, dom, month, dow] = fields[..] else {
            return Err(fail(if fields.is_empty() {
                "expression is empty".to_string()
            } else {
                format!(
                    "expected 5 fields (minute hour day-of-month month day-of-week), found {}",
                    fields.len()
                )
            }));
        };
        let parse = |field: &Field, text: &str| {
            parse_field(field, text)
                .map_err(|detail| fail(format!("{detail} in {} field", field.name)))
        };
        let mut days_of_week = parse(&DAY_OF_WEEK, dow)?;
        if days_of_week & (1 << 7) != 0 {
            days_of_week = (days_of_week & !(1 << 7)) | 1;
        }
        Ok(CronSchedule {
            text: s.to_string(),
            minutes: parse(&MINUTE, minute)?,
            hours: parse(&HOUR, hour)?,
            days_of_month: parse(&DAY_OF_MONTH, dom)?,
            months: parse(&MONTH, month)?,
            days_of_week,
            dom_star: dom.starts_with('*'),
            dow_star: dow.starts_with('*'),
        })
    }
}

impl fmt::Display for CronSchedule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

impl CronSchedule {
    /// The first matching minute strictly after `after_unix_secs` (UTC), as unix seconds; None
    /// if the schedule can never fire (e.g. Feb 30) within the next 5 years.
    ///
    /// Skips whole months, days and hours that cannot match, so the work is bounded by the
    /// number of days searched rather than minutes.
    pub fn next_after(&self, after_unix_secs: u64) -> Option<u64> {
        let start = (after_unix_secs / 60).checked_add(1)?.checked_mul(60)?;
        let mut day = i64::try_from(start / 86_400).ok()?;
        let mut hour = (start % 86_400 / 3_600) as u32;
        let mut minute = (start % 3_600 / 60) as u32;
        let last_day = day + SEARCH_DAYS;
        while day <= last_day {
            let (year, month, dom) = civil_from_days(day);
            if !has_bit(self.months, month) {
                // Jump to the first day of the next allowed month.
                day = match next_bit(self.months, month + 1) {
                    Some(next) => days_from_civil(year, next, 1),
                    None => days_from_civil(year + 1, next_bit(self.months, 1)?, 1),
                };
                (hour, minute) = (0, 0);
                continue;
            }
            if !self.day_matches(dom, weekday(day)) {
                day += 1;
                (hour, minute) = (0, 0);
                continue;
            }
            let Some(h) = next_bit(self.hours, hour) else {
                day += 1;
                (hour, minute) = (0, 0);
                continue;
            };
            if h != hour {
                (hour, minute) = (h, 0);
            }
            let Some(m) = next_bit(self.minutes, minute) else {
                // Hour 24 finds no hour bit above, which moves on to the next day.
                (hour, minute) = (hour + 1, 0);
                continue;
            };
            let secs_in_day = u64::from(hour) * 3_600 + u64::from(m) * 60;
            return u64::try_from(day)
                .ok()?
                .checked_mul(86_400)?
                .checked_add(secs_in_day);
        }
        None
    }

    /// Vixie cron's rule: when both day fields are restricted, either may match; otherwise
    /// both must (an unrestricted one always does).
    fn day_matches(&self, dom: u32, dow: u32) -> bool {
        let dom_ok = has_bit(self.days_of_month, dom);
        let dow_ok = has_bit(self.days_of_week, dow);
        if self.dom_star || self.dow_star {
            dom_ok && dow_ok
        } else {
            dom_ok || dow_ok
        }
    }
}

/// Parses one field (a comma list of items) into a bitset; the error is the detail only.
fn parse_field(field: &Field, text: &str) -> Result<u64, String> {
    let mut bits = 0u64;
    for item in text.split(',') {
        if item.is_empty() {
            return Err(format!("empty list item in '{text}'"));
        }
        let (base, step) = match item.split_once('/') {
            Some((base, step)) => (base, Some(parse_step(step)?)),
            None => (item, None),
        };
        let (lo, hi) = if base == "*" {
            (field.min, field.max)
        } else if let Some((a, b)) = base.split_once('-') {
            let (lo, hi) = (parse_value(field, a, item)?, parse_value(field, b, item)?);
            if lo > hi {
                return Err(format!("range '{base}' runs backwards"));
            }
            (lo, hi)
        } else {
            let v = parse_value(field, base, item)?;
            // `a/n` means `a-max/n`.
            (v, if step.is_some() { field.max } else { v })
        };
        let step = step.unwrap_or(1);
        let mut v = lo;
        while v <= hi {
            bits |= 1 << v;
            v = match v.checked_add(step) {
                Some(next) => next,
                None => break,
            };
        }
    }
    Ok(bits)
}

fn parse_step(text: &str) -> Result<u32, String> {
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!("invalid step '{text}'"));
    }
    match text.parse::<u32>() {
        Ok(0) => Err("step must be at least 1".to_string()),
        Ok(step) => Ok(step),
        Err(_) => Err(format!("step '{text}' is too large")),
    }
}

/// A number or (month and day-of-week only) a three-letter name, checked against the range.
fn parse_value(field: &Field, text: &str, item: &str) -> Result<u32, String> {
    if text.is_empty() {
        return Err(format!("missing value in '{item}'"));
    }
    if text.bytes().all(|b| b.is_ascii_digit()) {
        return match text.parse::<u32>() {
            Ok(v) if (field.min..=field.max).contains(&v) => Ok(v),
            _ => Err(format!(
                "value {text} out of range {}-{}",
                field.min, field.max
            )),
        };
    }
    (field.min..)
        .zip(field.names)
        .find(|(_, name)| name.eq_ignore_ascii_case(text))
        .map(|(v, _)| v)
        .ok_or_else(|| format!("invalid value '{text}'"))
}

fn has_bit(bits: u64, v: u32) -> bool {
    v < 64 && bits & (1 << v) != 0
}

/// The lowest set bit at or above `from`.
fn next_bit(bits: u64, from: u32) -> Option<u32> {
    if from >= 64 {
        return None;
    }
    let masked = bits & (u64::MAX << from);
    (masked != 0).then(|| masked.trailing_zeros())
}

/// Day of week of a day number (days since 1970-01-01, a Thursday), Sunday = 0.
fn weekday(days: i64) -> u32 {
    (days + 4).rem_euclid(7) as u32
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm).
fn days_from_civil(year: i64, month: u32, day: u32) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y.rem_euclid(400); // [0, 399]
    let m = i64::from(month);
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + i64::from(day) - 1; // [0, 365]
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy; // [0, 146096]
    era * 146_097 + doe - 719_468
}

/// (year, month 1-12, day 1-31) of a day number; the inverse of [`days_from_civil`].
pub(crate) fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097); // [0, 146096]
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365; // [0, 399]
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100); // [0, 365]
    let mp = (5 * doy + 2) / 153; // [0, 11], March = 0
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = (if mp < 10 { mp + 3 } else { mp - 9 }) as u32;
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
mod tests {
    use super::*;

    // Reference times, from `date -u -d '... UTC' +%s`.
    const FRI_2024_03_15_10_07_30: u64 = 1_710_497_250;

    fn cron(text: &str) -> CronSchedule {
        match text.parse() {
            Ok(schedule) => schedule,
            Err(e) => panic!("{text:?} should parse: {e}"),
        }
    }

    fn err(text: &str) -> String {
        match text.parse::<CronSchedule>() {
            Ok(s) => panic!("{text:?} should not parse, got {s:?}"),
            Err(e) => e.to_string(),
        }
    }

    fn next(text: &str, after: u64) -> Option<u64> {
        cron(text).next_after(after)
    }

    #[test]
    fn civil_date_math() {
        assert_eq!(days_from_civil(1970, 1, 1), 0);
        assert_eq!(days_from_civil(2000, 3, 1), 11_017); // 951868800 / 86400
        assert_eq!(civil_from_days(11_017), (2000, 3, 1));
        assert_eq!(civil_from_days(1_709_164_800 / 86_400), (2024, 2, 29));
        assert_eq!(civil_from_days(-1), (1969, 12, 31));
        assert_eq!(weekday(0), 4); // Thursday
        assert_eq!(weekday(1_710_633_600 / 86_400), 0); // 2024-03-17, a Sunday
                                                        // Round trip over 1900..2500, checking days are consecutive.
        let mut expect = days_from_civil(1900, 1, 1);
        for year in 1900..2500 {
            let leap = (year % 4 == 0 && year % 100 != 0) || year % 400 == 0;
            for month in 1..=12u32 {
                let len = match month {
                    2 if leap => 29,
                    2 => 28,
                    4 | 6 | 9 | 11 => 30,
                    _ => 31,
                };
                for day in 1..=len {
                    assert_eq!(days_from_civil(year, month, day), expect);
                    assert_eq!(civil_from_days(expect), (year, month, day));
                    expect += 1;
                }
            }
        }
    }

    #[test]
    fn rejects_wrong_field_count_and_empty() {
        assert_eq!(
            err("* * * *"),
            "invalid cron expression '* * * *': expected 5 fields \
             (minute hour day-of-month month day-of-week), found 4"
        );
        assert_eq!(
            err("* * * * * *"),
            "invalid cron expression '* * * * * *': expected 5 fields \
             (minute hour day-of-month month day-of-week), found 6"
        );
        assert_eq!(err(""), "invalid cron expression '': expression is empty");
        assert_eq!(
            err("   "),
            "invalid cron expression '   ': expression is empty"
        );
        assert_eq!(
            err("@reboot"),
            "invalid cron expression '@reboot': unknown macro '@reboot'"
        );
        assert_eq!(err("@"), "invalid cron expression '@': unknown macro '@'");
    }

    #[test]
    fn rejects_out_of_range_values() {
        assert_eq!(
            err("60 * * * *"),
            "invalid cron expression '60 * * * *': value 60 out of range 0-59 in minute field"
        );
        assert_eq!(
            err("0 24 * * *"),
            "invalid cron expression '0 24 * * *': value 24 out of range 0-23 in hour field"
        );
        assert_eq!(
            err("0 0 0 * *"),
            "invalid cron expression '0 0 0 * *': value 0 out of range 1-31 in day-of-month field"
        );
        assert!(err("0 0 32 * *").ends_with("value 32 out of range 1-31 in day-of-month field"));
        assert!(err("0 0 * 13 *").ends_with("value 13 out of range 1-12 in month field"));
        assert!(err("0 0 * 0 *").ends_with("value 0 out of range 1-12 in month field"));
        assert!(err("0 0 * * 8").ends_with("value 8 out of range 0-7 in day-of-week field"));
        assert!(err("1-60 * * * *").ends_with("value 60 out of range 0-59 in minute field"));
        assert!(err("99999999999 * * * *")
            .ends_with("value 99999999999 out of range 0-59 in minute field"));
    }

    #[test]
    fn rejects_zero_and_bad_steps() {
        assert_eq!(
            err("*/0 * * * *"),
            "invalid cron expression '*/0 * * * *': step must be at least 1 in minute field"
        );
        assert!(err("0 1-5/0 * * *").ends_with("step must be at least 1 in hour field"));
        assert!(err("*/x * * * *").ends_with("invalid step 'x' in minute field"));
        assert!(err("*/ * * * *").ends_with("invalid step '' in minute field"));
        assert!(err("*/-1 * * * *").ends_with("invalid step '-1' in minute field"));
        assert!(err("*/1/2 * * * *").ends_with("invalid step '1/2' in minute field"));
        assert!(err("*/99999999999 * * * *")
            .ends_with("step '99999999999' is too large in minute field"));
    }

    #[test]
    fn rejects_garbage() {
        assert_eq!(
            err("a * * * *"),
            "invalid cron expression 'a * * * *': invalid value 'a' in minute field"
        );
        assert!(err("* * * FOO *").ends_with("invalid value 'FOO' in month field"));
        assert!(err("* * * * SUNDAY").ends_with("invalid value 'SUNDAY' in day-of-week field"));
        // Names only where the field has them.
        assert!(err("* * * * JAN").ends_with("invalid value 'JAN' in day-of-week field"));
        assert!(err("* * MON * *").ends_with("invalid value 'MON' in day-of-month field"));
        assert!(err("+5 * * * *").ends_with("invalid value '+5' in minute field"));
        assert!(err("1- * * * *").ends_with("missing value in '1-' in minute field"));
        assert!(err("-1 * * * *").ends_with("missing value in '-1' in minute field"));
        assert!(err("1--2 * * * *").ends_with("invalid value '-2' in minute field"));
        assert!(err("1,,2 * * * *").ends_with("empty list item in '1,,2' in minute field"));
        assert!(err(", * * * *").ends_with("empty list item in ',' in minute field"));
        assert!(err("** * * * *").ends_with("invalid value '**' in minute field"));
        assert!(err("*-5 * * * *").ends_with("invalid value '*' in minute field"));
    }

    #[test]
    fn rejects_reversed_range() {
        assert_eq!(
            err("10-5 * * * *"),
            "invalid cron expression '10-5 * * * *': range '10-5' runs backwards in minute field"
        );
        assert!(err("* * * DEC-JAN *").ends_with("range 'DEC-JAN' runs backwards in month field"));
        assert!(
            err("* * * * FRI-MON").ends_with("range 'FRI-MON' runs backwards in day-of-week field")
        );
    }

    #[test]
    fn parses_fields_into_bitsets() {
        let s = cron("1-10/3,30 */6 1,15 JAN-mar sun,7,Wed");
        assert_eq!(
            s.minutes,
            (1 << 1) | (1 << 4) | (1 << 7) | (1 << 10) | (1 << 30)
        );
        assert_eq!(s.hours, (1 << 0) | (1 << 6) | (1 << 12) | (1 << 18));
        assert_eq!(s.days_of_month, (1 << 1) | (1 << 15));
        assert_eq!(s.months, 0b1110);
        assert_eq!(s.days_of_week, (1 << 0) | (1 << 3));
        assert!(!s.dom_star && !s.dow_star);

        // `a/n` runs to the field's maximum.
        assert_eq!(
            cron("50/4 * * * *").minutes,
            (1 << 50) | (1 << 54) | (1 << 58)
        );
        assert_eq!(cron("* * * * *").minutes, (1u64 << 60) - 1);
        // Day-of-week 7 is Sunday; `1/2` over 0-7 is 1,3,5,7 (Mon, Wed, Fri, Sun).
        assert_eq!(cron("* * * * 7").days_of_week, 1);
        assert_eq!(cron("* * * * 0-7").days_of_week, 0x7f);
        assert_eq!(cron("* * * * 1/2").days_of_week, 0b10_1011);
        // A step beyond the range keeps just the first value.
        assert_eq!(cron("*/60 * * * *").minutes, 1);
        // Extra whitespace between and around fields is fine.
        assert_eq!(cron("  0\t12  * *   * ").hours, 1 << 12);
    }

    #[test]
    fn display_is_the_original_text() {
        assert_eq!(cron("*/5 * * * *").to_string(), "*/5 * * * *");
        assert_eq!(cron("@Hourly").to_string(), "@Hourly");
        assert_eq!(cron("0 12 * * MON-FRI").to_string(), "0 12 * * MON-FRI");
    }

    #[test]
    fn every_five_minutes() {
        // 2024-03-15 10:07:30 -> 10:10:00.
        assert_eq!(
            next("*/5 * * * *", FRI_2024_03_15_10_07_30),
            Some(1_710_497_400)
        );
        // Strictly after: from exactly 10:10:00 -> 10:15:00.
        assert_eq!(next("*/5 * * * *", 1_710_497_400), Some(1_710_497_700));
        // `* * * * *` is the next whole minute: 10:07:30 -> 10:08:00; 10:07:00 -> 10:08:00.
        assert_eq!(
            next("* * * * *", FRI_2024_03_15_10_07_30),
            Some(1_710_497_280)
        );
        assert_eq!(next("* * * * *", 1_710_497_220), Some(1_710_497_280));
    }

    #[test]
    fn step_lists() {
        let s = "1-10/3,30 * * * *"; // minutes 1, 4, 7, 10, 30
        assert_eq!(next(s, FRI_2024_03_15_10_07_30), Some(1_710_497_400)); // 10:10
        assert_eq!(next(s, 1_710_497_400), Some(1_710_498_600)); // 10:30
        assert_eq!(next(s, 1_710_498_600), Some(1_710_500_460)); // 11:01
    }

    #[test]
    fn leap_day() {
        // From 2024-03-01 the next Feb 29 is 2028-02-29.
        assert_eq!(next("0 0 29 2 *", 1_709_251_200), Some(1_835_395_200));
        // From 2023-06-01 it is 2024-02-29.
        assert_eq!(next("0 0 29 2 *", 1_685_577_600), Some(1_709_164_800));
        // 15 0 29 FEB from 2024-02-28 23:59 -> 2024-02-29 00:15.
        assert_eq!(next("15 0 29 FEB *", 1_709_164_740), Some(1_709_165_700));
    }

    #[test]
    fn weekdays_at_noon() {
        let s = "0 12 * * MON-FRI";
        // Friday 2024-03-15 10:07:30 -> same day 12:00.
        assert_eq!(next(s, FRI_2024_03_15_10_07_30), Some(1_710_504_000));
        // Friday 11:59 -> Friday 12:00.
        assert_eq!(next(s, 1_710_503_940), Some(1_710_504_000));
        // Friday 12:00 -> Monday 2024-03-18 12:00, skipping the weekend.
        assert_eq!(next(s, 1_710_504_000), Some(1_710_763_200));
        assert_eq!(next("0 12 * * mon-fri", 1_710_504_000), Some(1_710_763_200));
        assert_eq!(next("0 12 * * 1-5", 1_710_504_000), Some(1_710_763_200));
    }

    #[test]
    fn sunday_is_zero_or_seven() {
        // Friday 2024-03-15 -> Sunday 2024-03-17 00:00.
        for s in ["0 0 * * 0", "0 0 * * 7", "0 0 * * SUN", "@weekly"] {
            assert_eq!(next(s, FRI_2024_03_15_10_07_30), Some(1_710_633_600), "{s}");
        }
    }

    #[test]
    fn day_of_month_or_day_of_week() {
        // Both restricted: the 13th OR any Friday. From Friday 2024-03-01 00:00:
        let s = "0 0 13 * FRI";
        assert_eq!(next(s, 1_709_251_200), Some(1_709_856_000)); // Fri 2024-03-08
        assert_eq!(next(s, 1_709_856_000), Some(1_710_288_000)); // Wed 2024-03-13
        assert_eq!(next(s, 1_710_288_000), Some(1_710_460_800)); // Fri 2024-03-15
                                                                 // Only one restricted: the other must match too (`*` matches everything).
        assert_eq!(next("0 0 13 * *", 1_709_251_200), Some(1_710_288_000));
        assert_eq!(next("0 0 * * FRI", 1_709_251_200), Some(1_709_856_000));
        // As in Vixie cron, a field starting with `*` (even `*/10`) counts as unrestricted, so
        // days 1, 11, 21, 31 AND Monday: from 2024-01-02 -> Monday 2024-03-11, not Monday
        // 2024-01-08 as the OR rule would give.
        assert_eq!(next("0 0 */10 * MON", 1_704_153_600), Some(1_710_115_200));
        assert_eq!(
            next("0 0 1-31/10 * MON", 1_704_153_600),
            Some(1_704_672_000)
        );
    }

    #[test]
    fn macros() {
        let t = FRI_2024_03_15_10_07_30;
        assert_eq!(next("@hourly", t), Some(1_710_500_400)); // 11:00
        assert_eq!(next("@HOURLY", t), Some(1_710_500_400));
        assert_eq!(next("@daily", t), Some(1_710_547_200)); // 2024-03-16
        assert_eq!(next("@midnight", t), Some(1_710_547_200));
        assert_eq!(next("@monthly", t), Some(1_711_929_600)); // 2024-04-01
        assert_eq!(next("@yearly", t), Some(1_735_689_600)); // 2025-01-01
        assert_eq!(next("@annually", t), Some(1_735_689_600));
        assert_eq!(cron(" @daily ").next_after(t), Some(1_710_547_200));
    }

    #[test]
    fn year_rollover() {
        // 2024-12-31 23:59:59 -> 2025-01-01 00:00.
        assert_eq!(next("0 0 1 1 *", 1_735_689_599), Some(1_735_689_600));
        assert_eq!(next("* * * * *", 1_735_689_599), Some(1_735_689_600));
        // 59 23 31 12 from 2024-12-31 23:59:00 -> 2025-12-31 23:59.
        assert_eq!(next("59 23 31 DEC *", 1_735_689_540), Some(1_767_225_540));
        // Month list wrapping into next year: MAR-MAY on the 1st, from 2024-06-01 -> 2025-03-01.
        assert_eq!(next("0 0 1 mar-may *", 1_717_200_000), Some(1_740_787_200));
        assert_eq!(
            next("0 0 1 mar-may *", FRI_2024_03_15_10_07_30),
            Some(1_711_929_600)
        );
    }

    #[test]
    fn thirty_first_skips_short_months() {
        let s = "0 0 31 * *";
        assert_eq!(next(s, 1_706_659_200), Some(1_711_843_200)); // 2024-01-31 -> 03-31
        assert_eq!(next(s, 1_711_843_200), Some(1_717_113_600)); // 03-31 -> 05-31
        assert_eq!(next(s, 1_717_113_600), Some(1_722_384_000)); // 05-31 -> 07-31
        assert_eq!(next(s, 1_722_384_000), Some(1_725_062_400)); // 07-31 -> 08-31
    }

    #[test]
    fn impossible_schedules_never_fire() {
        let t = FRI_2024_03_15_10_07_30;
        assert_eq!(next("0 0 30 2 *", t), None);
        assert_eq!(next("0 0 31 FEB *", t), None);
        assert_eq!(next("0 0 31 4,6,9,11 *", t), None);
        // But with a restricted day-of-week as well, the OR rule makes it fire: the first
        // Sunday in February after 2024-03-15 is 2025-02-02.
        assert_eq!(next("0 0 30 2 0", t), Some(1_738_454_400));
        // 2100 is not a leap year, so from 2097-01-01 the next Feb 29 (2104) is beyond 5 years.
        assert_eq!(next("0 0 29 2 *", 4_007_836_800), None);
    }

    /// Whether the minute starting at `t` matches, checked field by field.
    fn matches_at(s: &CronSchedule, t: u64) -> bool {
        let day = (t / 86_400) as i64;
        let (_, month, dom) = civil_from_days(day);
        has_bit(s.minutes, (t % 3_600 / 60) as u32)
            && has_bit(s.hours, (t % 86_400 / 3_600) as u32)
            && has_bit(s.months, month)
            && s.day_matches(dom, weekday(day))
    }

    #[test]
    fn agrees_with_a_minute_by_minute_scan() {
        let schedules = [
            "*/7 * * * *",
            "1-10/3,30 */5 * * *",
            "0 12 * * MON-FRI",
            "15 3 13 * FRI",
            "0 0 */10 * MON",
            "45 23 * JAN,JUL SAT,SUN",
            "0 0 28-31 * *",
        ];
        for text in schedules {
            let s = cron(text);
            // Starts spread over 2023-2025, at odd seconds.
            for i in 0..24u64 {
                let after = 1_672_531_200 + i * 3_987_653;
                let Some(found) = s.next_after(after) else {
                    panic!("{text} from {after}")
                };
                assert!(found > after && found % 60 == 0, "{text} from {after}");
                assert!(matches_at(&s, found), "{text} from {after}: {found}");
                let mut t = (after / 60 + 1) * 60;
                while t < found {
                    assert!(!matches_at(&s, t), "{text} from {after}: missed {t}");
                    t += 60;
                }
            }
        }
    }

    #[test]
    fn no_overflow_near_the_end_of_time() {
        assert_eq!(next("* * * * *", u64::MAX), None);
        assert_eq!(next("0 0 29 2 *", u64::MAX - 86_400 * 400), None);
        // The last whole minute a u64 can hold is 18446744073709551600.
        assert_eq!(
            next("* * * * *", 18_446_744_073_709_551_599),
            Some(18_446_744_073_709_551_600)
        );
        assert_eq!(next("* * * * *", 18_446_744_073_709_551_600), None);
    }
}
